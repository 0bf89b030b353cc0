"""The built-in `reference` agent: a scripted post-training engineer (no LLM).

It uses only the workspace contract (docs/ARCHITECTURE.md): env vars, `data/train.jsonl`,
`models/<name>/`, `output/`, `logs/metrics.jsonl`, `run_meta.json` and the grading API.

1. Writes its training code into `code/` (sft.py, grpo.py, common.py, metrics_callback.py).
2. SFT (TRL SFTTrainer) on the train split's demonstrations -> `output/v1`, submitted.
3. GRPO (TRL GRPOTrainer, exact-match reward, group sampling) from the best model so far ->
   `output/v2`, submitted; more GRPO rounds while they still help and the budget allows.

On ALFWorld (the data folder holds `alfworld_api/` and the expert SFT files) the pipeline is
instead: play a reactive expert on the train games in the real engine (alfworld_collect.py: every
step follows from what the grader's prompt shows; it searches receptacles in room order and brings
the object to the first place of the needed type), from the start and after a few random moves,
then SFT on those trajectories, with object names renamed in extra copies (alfworld_sft.py) ->
`output/v1`, with the loss on every token (the model learns to read the prompt). A focus stage
continues from v1 on the same data with the loss on the command only and the decision steps
(take, move, heat, ...) weighed x4 -> `output/v2` (`alf_focus_steps`; 0 skips it). The shipped
expert files (the planner, which knows where objects are) are used only if collection yields
nothing. With `alf_dagger_rounds`, DAgger rounds follow: the best model so far plays the train
games as the grader would (`alf_max_steps`), the expert labels every state it reaches
(alfworld_dagger.py), and SFT continues on the expert's data plus those labels -> the next
`output/vN`; every model is submitted and the best is kept.
On WebShop (the data folder holds `webshop_api/`) it trains on the shipped expert steps (the
expert reads only the page, so its steps can be imitated) with a lean PyTorch loop
(lean_sft.py: length-bucketed batches, no gradient checkpointing; `ws_rename` of the drawn
examples get fresh product ids, so the id must be copied off the page, and `ws_permute` their
type's attributes and option values permuted, so the values must be read off the instruction):
the loss on every token
(`ws_prompt_weight` on the prompt's) -> `output/v1`, then a focus stage on the actions alone ->
`output/v2` (`ws_focus_steps`; 0 skips it). With `ws_dagger_episodes`, v1 first plays that many
train instructions through the workspace's `webshop_api` and the expert labels every page it
reached (webshop_dagger.py); the focus stage then trains on those labels too. With `ws_practice`
(off: measured no gain), the agent first writes that many practice instructions per product of
the shop's catalog and adds the expert's won steps on them to the SFT data (webshop_practice.py).

On DeepSearchQA (the data folder holds `deepsearchqa_api/`) it fine-tunes on the shipped expert
trajectories (one example per tool step, the grader's exact prompt) plus `dsqa_rename` copies of
each with the names and document ids renamed and, in `dsqa_reword` of them, the question's wording
varied (dsqa_rename.py: the action must be read off the prompt, whatever the wording), with the
lean loop (lean_sft.py) and the loss on every token -> `output/v1`, then continues with the loss
on the action only -> `output/v2` (`dsqa_focus_steps`; 0 skips it); both are submitted. On the
official questions (AutoRL-Bench's ReAct loop; the train split ships no SFT data) the rows are
written first: each train question answered in one step of the loop's text (dsqa_answers.py).
On ALFWorld under AutoRL-Bench's ReAct protocol (the shipped SFT rows are text) the collected
steps are written in the grader's ReAct text (alfworld_collect.py --react) and trained on with
the lean loop (plain LM SFT on prompt + completion); the DAgger rounds are skipped there.
Every stage gets a wall-clock stop time well before the deadline and is killed if it overruns.

Options: `REFERENCE_AGENT_OPTIONS="sft_steps=400,grpo_steps=60,lora=16"` or the same as
`key=value` arguments (see DEFAULTS).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULTS = {
    "sft_steps": 400, "sft_lr": 2e-3, "sft_batch": 32, "teacher_share": 0.75,
    "grpo_steps": 60, "grpo_lr": 5e-5, "grpo_beta": 0.04, "grpo_prompts": 8, "grpo_gens": 8,
    "grpo_rounds": 3, "more_grpo_steps": 30, "min_gain": 1.0, "lora": 0, "threads": 2,
    "submit_reserve_s": 25.0, "sft_share": 0.6,
    "alf_collect_share": 0.2, "alf_collect_variants": 3, "alf_sft_steps": 1700, "alf_sft_lr": 2e-3, "alf_sft_batch": 16,
    "alf_rename": 3, "alf_decisions": 2, "alf_full_loss": 1, "alf_submit_reserve_s": 300.0,
    "alf_focus_steps": 1000, "alf_focus_lr": 1e-3, "alf_focus_decisions": 4, "alf_focus_share": 0.35,
    "alf_dagger_rounds": 0, "alf_dagger_share": 0.35, "alf_dagger_steps": 300, "alf_dagger_lr": 1e-3,
    "alf_max_steps": 30,
    "ws_sft_steps": 1500, "ws_sft_lr": 3e-3, "ws_sft_batch": 8, "ws_prompt_weight": 1.0, "ws_decisions": 2,
    "ws_focus_steps": 600, "ws_focus_lr": 1e-3, "ws_focus_share": 0.35, "ws_submit_reserve_s": 180.0,
    "ws_rename": 0.5, "ws_permute": 1.0, "ws_focus_prompt_weight": 0.0, "ws_dagger_episodes": 0, "ws_max_steps": 15,
    "ws_practice": 0,
    "dsqa_sft_steps": 3000, "dsqa_sft_lr": 2e-3, "dsqa_sft_batch": 8, "dsqa_focus_steps": 300, "dsqa_focus_lr": 1e-3,
    "dsqa_focus_share": 0.3, "dsqa_submit_reserve_s": 120.0, "dsqa_rename": 8, "dsqa_reword": 0.6,
    "dsqa_prompt_weight": 1.0,
}


def log(msg: str) -> None:
    print(f"[reference] {msg}", flush=True)


def parse_options(argv: list[str]) -> dict:
    opts = dict(DEFAULTS)
    pairs = [p for p in os.environ.get("REFERENCE_AGENT_OPTIONS", "").replace(" ", ",").split(",") if p] + argv
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.lstrip("-")
        if not sep or key not in DEFAULTS:
            raise SystemExit(f"reference agent: bad option {pair!r}; use key=value with key in {sorted(DEFAULTS)}")
        opts[key] = type(DEFAULTS[key])(float(value)) if isinstance(DEFAULTS[key], int) else float(value)
    return opts


def _as_epoch(value) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt.timestamp()


class GradingClient:
    def __init__(self, url: str):
        self.url = url.rstrip("/")

    def _call(self, method: str, path: str, body: dict | None = None, timeout: float = 30.0) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            return {"error": f"HTTP {exc.code}: {detail}"}
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            return {"error": f"grading API unreachable: {exc}"}

    def time(self) -> dict:
        return self._call("GET", "/time")

    def submit(self, model_path: str, timeout: float) -> dict:
        return self._call("POST", "/submit", {"model_path": model_path}, timeout=timeout)

    def submissions(self) -> dict:
        return self._call("GET", "/submissions")


class Workspace:
    def __init__(self):
        self.root = Path(os.environ.get("WORKSPACE") or os.getcwd()).resolve()
        self.code = self.root / "code"
        self.output = Path(os.environ.get("OUTPUT_DIR") or self.root / "output")
        self.logs = self.root / "logs"
        self.model = Path(os.environ.get("MODEL_PATH") or next((self.root / "models").iterdir()))
        data = Path(os.environ.get("DATA_PATH") or self.root / "data")
        self.data = data
        self.train = data / "train.jsonl" if data.is_dir() else data
        self.meta = self._read_meta()
        self.api = GradingClient(os.environ["GRADING_SERVER_URL"]) if os.environ.get("GRADING_SERVER_URL") else None

    def _read_meta(self) -> dict:
        try:
            return json.loads((self.root / "run_meta.json").read_text())
        except (OSError, ValueError):
            return {}

    def deadline(self) -> float:
        """The earliest deadline any source states; the API's remaining time is the freshest."""
        candidates = [_as_epoch(os.environ.get("RUN_DEADLINE")), _as_epoch(self._read_meta().get("deadline"))]
        meta = self._read_meta()
        if meta.get("start_time") is not None and meta.get("timeout_s") is not None:
            start = _as_epoch(meta["start_time"])
            if start is not None:
                candidates.append(start + float(meta["timeout_s"]))
        if self.api:
            t = self.api.time()
            for key in ("remaining_s", "remaining_seconds", "remaining"):
                if isinstance(t.get(key), (int, float)):
                    candidates.append(time.time() + float(t[key]))
                    break
            if _as_epoch(t.get("deadline")):
                candidates.append(_as_epoch(t["deadline"]))
        known = [c for c in candidates if c]
        return min(known) if known else time.time() + 600.0

    def seed(self) -> int:
        for value in (self.meta.get("seed"), os.environ.get("RUN_SEED"), os.environ.get("SEED")):
            if value is not None:
                try:
                    return int(value)
                except (TypeError, ValueError):
                    pass
        return 0


def write_code(ws: Workspace) -> None:
    ws.code.mkdir(parents=True, exist_ok=True)
    for src in sorted((HERE / "pipeline").glob("*.py")):
        shutil.copyfile(src, ws.code / src.name)
    log(f"wrote the training pipeline into {ws.code}: {', '.join(p.name for p in sorted(ws.code.glob('*.py')))}")


def run_stage(ws: Workspace, script: str, args: list[str], kill_at: float, threads: int) -> dict | None:
    """Run code/<script> in the workspace; stream its output; kill it at `kill_at`. Returns its summary."""
    env = dict(os.environ, PIPELINE_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               GOMP_SPINCOUNT=os.environ.get("GOMP_SPINCOUNT", "1000"), TOKENIZERS_PARALLELISM="false",
               METRICS_FILE=os.environ.get("METRICS_FILE", str(ws.logs / "metrics.jsonl")))
    cmd = [sys.executable, str(ws.code / script), *args]
    log("running " + " ".join([Path(cmd[0]).name, f"code/{script}", *args]))
    proc = subprocess.Popen(cmd, cwd=ws.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    summary: dict = {}

    def pump():
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            if line.startswith("{") and '"stage"' in line:
                try:
                    summary.update(json.loads(line))
                except ValueError:
                    pass

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    while proc.poll() is None:
        if time.time() >= kill_at:
            log(f"{script} overran its time; stopping it")
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            break
        time.sleep(0.2)
    reader.join(timeout=5)
    if proc.returncode != 0 or not summary:
        log(f"{script} failed (exit {proc.returncode})")
        return None
    return summary


def submit(ws: Workspace, name: str, deadline: float) -> float | None:
    if ws.api is None:
        log(f"no GRADING_SERVER_URL: not submitting {name}")
        return None
    if time.time() >= deadline:
        log(f"no time left to submit {name}")
        return None
    res = ws.api.submit(f"output/{name}", timeout=max(30.0, deadline - time.time() + 600))
    if "error" in res or res.get("score") is None:
        log(f"submission of output/{name} was not scored: {res.get('error') or res}")
        return None
    log(f"output/{name}: dev score {res['score']:.1f} (baseline {res.get('baseline_score')}, "
        f"improvement {res.get('improvement')}, best {res.get('best')})")
    return float(res["score"])


def is_alfworld(ws: Workspace) -> bool:
    return (ws.data / "alfworld_api").is_dir() and (ws.data / "sft_prompt_completion.jsonl").exists()


def rows_are_text(path: Path) -> bool:
    """Whether an SFT file's rows are text (`prompt` a string: a plain-text protocol such as
    AutoRL-Bench's ReAct loop, whose grader completes the text itself) rather than chat messages."""
    try:
        with open(path) as fh:
            for line in fh:
                if line.strip():
                    return isinstance(json.loads(line).get("prompt"), str)
    except (OSError, ValueError, AttributeError):
        pass
    return False


def alfworld_sft(ws: Workspace, opts: dict, model: Path, name: str, files: list[str], steps: int, lr: float,
                 seed: int, stop_at: float, threads: int, full_loss: int | None = None,
                 decisions: int | None = None, react: bool = False) -> dict | None:
    """SFT `model` on the trajectory files -> output/<name>; stops itself at `stop_at`. Under the
    ReAct text protocol (`react`: text rows) plain LM SFT with the lean loop, the prompt's tokens
    weighed 1 with `full_loss` else 0 (no renamed copies, no decision weights: both read chat rows)."""
    full_loss = int(opts["alf_full_loss"]) if full_loss is None else full_loss
    decisions = int(opts["alf_decisions"]) if decisions is None else decisions
    if react:
        return run_stage(ws, "lean_sft.py", ["--model", str(model), "--out", str(ws.output / name), "--data", *files,
                                             "--steps", str(steps), "--lr", str(lr),
                                             "--batch", str(int(opts["alf_sft_batch"])), "--decisions", "1",
                                             "--prompt_weight", "1.0" if full_loss else "0.0", "--seed", str(seed),
                                             "--stop_at", str(stop_at)],
                         kill_at=stop_at + opts["alf_submit_reserve_s"] / 2, threads=threads)
    return run_stage(ws, "alfworld_sft.py", ["--model", str(model), "--out", str(ws.output / name), "--data", *files,
                                             "--steps", str(steps), "--lr", str(lr),
                                             "--batch", str(int(opts["alf_sft_batch"])),
                                             "--rename", str(int(opts["alf_rename"])), "--seed", str(seed),
                                             "--full_loss", str(full_loss), "--decisions", str(decisions),
                                             "--stop_at", str(stop_at)],
                     kill_at=stop_at + opts["alf_submit_reserve_s"] / 2, threads=threads)


def is_deepsearchqa(ws: Workspace) -> bool:
    return (ws.data / "deepsearchqa_api").is_dir()


def deepsearchqa_main(ws: Workspace, opts: dict, deadline: float, seed: int, threads: int) -> dict | None:
    """SFT (lean_sft.py) on the expert's tool steps and their renamed, reworded copies (loss on every
    token) -> v1, then on the actions only -> v2. A train split without SFT data (the official
    questions: no corpus, no expert) gets rows of its own first (dsqa_answers.py: each train
    question answered in one step of the grader's ReAct text)."""
    reserve = opts["dsqa_submit_reserve_s"]
    files = [str(ws.data / "sft_prompt_completion.jsonl")]
    left = deadline - reserve - time.time()
    if left < 30:
        log(f"not enough budget to train anything ({left:.0f}s after the submission reserve); stopping")
        return None
    if not (ws.data / "sft_prompt_completion.jsonl").exists():
        answers = ws.logs / "dsqa_answers.jsonl"
        log("the train split ships no SFT data: writing its questions answered in the ReAct loop's text")
        got = run_stage(ws, "dsqa_answers.py", ["--data", str(ws.data), "--out", str(answers)],
                        kill_at=time.time() + 60, threads=threads)
        if not got or not got.get("examples"):
            log("no train question with an answer to learn from; stopping")
            return None
        files = [str(answers)]
    # renamed copies: the names and ids of an action must be copied from the prompt, not memorized
    if int(opts["dsqa_rename"]) > 0 and (ws.data / "corpus.jsonl").exists():
        renamed = ws.logs / "dsqa_renamed.jsonl"
        if run_stage(ws, "dsqa_rename.py", ["--data", files[0], "--corpus", str(ws.data / "corpus.jsonl"),
                                            "--out", str(renamed), "--copies", str(int(opts["dsqa_rename"])),
                                            "--reword", str(opts["dsqa_reword"]), "--seed", str(seed)],
                     kill_at=time.time() + 60, threads=threads):
            files.append(str(renamed))
    stages = [("v1", ws.model, int(opts["dsqa_sft_steps"]), opts["dsqa_sft_lr"], opts["dsqa_prompt_weight"])]
    if int(opts["dsqa_focus_steps"]) > 0:
        stages.append(("v2", ws.output / "v1", int(opts["dsqa_focus_steps"]), opts["dsqa_focus_lr"], 0.0))
    scores: dict[str, float | None] = {}
    for n, (name, model, steps, lr, prompt_weight) in enumerate(stages):
        left = deadline - reserve - time.time()
        if n and left < 45:      # loading, a few steps and saving take about that on a CPU
            log(f"stopping: {left:.0f}s left before the submission reserve, too little for {name}")
            break
        share = 1.0 if n == len(stages) - 1 else 1 - opts["dsqa_focus_share"]
        stop_at = time.time() + share * left
        sft = run_stage(ws, "lean_sft.py", ["--model", str(model), "--out", str(ws.output / name), "--data", *files,
                                            "--steps", str(steps), "--lr", str(lr),
                                            "--batch", str(int(opts["dsqa_sft_batch"])), "--rename", "0",
                                            "--decisions", "1", "--seed", str(seed + n),
                                            "--prompt_weight", str(prompt_weight), "--stop_at", str(stop_at)],
                        kill_at=stop_at + reserve / 2, threads=threads)
        if sft is None:
            break
        scores[name] = submit(ws, name, deadline)
    return scores or None


def better(scores: dict, best: str, new: str) -> str:
    """The model to keep: `new` if it scored at least as well as `best` (ties go to the newer one)."""
    if scores[new] is not None and (scores[best] is None or scores[new] >= scores[best]):
        return new
    return best


def alfworld_main(ws: Workspace, opts: dict, deadline: float, seed: int, threads: int) -> dict | None:
    """Collect reactive-expert trajectories online, SFT on them -> v1, the focus stage -> v2, then the
    optional DAgger rounds; every model is submitted. Returns the dev scores by model name."""
    reserve = opts["alf_submit_reserve_s"]      # grading plays every dev game: minutes on a CPU
    remaining = deadline - time.time() - reserve
    if remaining < 60:
        log(f"not enough budget to train anything ({remaining:.0f}s after the submission reserve); stopping")
        return None
    collected = ws.logs / "alfworld_search.jsonl"
    collect_stop = time.time() + opts["alf_collect_share"] * remaining
    # the shipped rows say how the grader prompts: text rows = AutoRL-Bench's ReAct text, chat rows = ours
    react = rows_are_text(ws.data / "sft_prompt_completion.jsonl")
    if react:
        log("the grader prompts with AutoRL-Bench's ReAct text: collecting and training in that format")
    got = run_stage(ws, "alfworld_collect.py", ["--data", str(ws.data), "--out", str(collected),
                                                "--variants", str(int(opts["alf_collect_variants"])),
                                                "--seed", str(seed), "--stop_at", str(collect_stop),
                                                *(["--react"] if react else [])],
                    kill_at=collect_stop + 60, threads=threads)
    if got and got.get("examples"):
        files = [str(collected)]
    else:
        log("collection gave nothing; training on the shipped planner trajectories instead")
        files = [str(ws.data / "sft_prompt_completion.jsonl")]
    rounds = int(opts["alf_dagger_rounds"])
    if react and rounds:
        log("DAgger rounds label the harness's chat prompts, not the ReAct text: skipping them")
        rounds = 0
    focus_steps = int(opts["alf_focus_steps"])
    dagger_share = opts["alf_dagger_share"] if rounds > 0 else 0.0
    focus_share = opts["alf_focus_share"] if focus_steps > 0 else 0.0
    left = deadline - reserve - time.time()
    # the later stages get their shares of what is left; v1 keeps at least a fifth whatever they ask
    sft_stop = time.time() + max(0.2, 1 - dagger_share - focus_share) * left
    sft = alfworld_sft(ws, opts, ws.model, "v1", files, int(opts["alf_sft_steps"]), opts["alf_sft_lr"], seed,
                       sft_stop, threads, react=react)
    if sft is None:
        return None
    scores = {"v1": submit(ws, "v1", deadline)}
    best, n_model = "v1", 1
    if focus_steps > 0:
        # v1 has learned to read the prompt (loss on every token); most of its errors are now the few
        # decisions per game (which object, which appliance, where to bring it): train on those alone
        left = deadline - reserve - time.time()
        focus_stop = time.time() + (1 - dagger_share) * left
        n_model = 2
        sft = alfworld_sft(ws, opts, ws.output / "v1", "v2", files, focus_steps, opts["alf_focus_lr"], seed + 1,
                           focus_stop, threads, full_loss=0, decisions=int(opts["alf_focus_decisions"]), react=react)
        if sft is not None:
            scores["v2"] = submit(ws, "v2", deadline)
            best = better(scores, best, "v2")
    for n in range(1, rounds + 1):
        left = deadline - reserve - time.time()
        if left < 120:
            log(f"DAgger round {n}: {left:.0f}s left before the submission reserve; stopping")
            break
        labels = ws.logs / f"alfworld_dagger{n}.jsonl"
        play_stop = time.time() + left / 3
        got = run_stage(ws, "alfworld_dagger.py", ["--model", str(ws.output / best), "--data", str(ws.data),
                                                   "--out", str(labels), "--seed", str(seed + n),
                                                   "--max_steps", str(int(opts["alf_max_steps"])),
                                                   "--stop_at", str(play_stop)],
                        kill_at=play_stop + 120, threads=threads)
        if not got or not got.get("examples"):
            log(f"DAgger round {n}: no labels; stopping")
            break
        files.append(str(labels))
        name = f"v{n_model + n}"
        sft_stop = deadline - reserve - (deadline - reserve - time.time()) * (rounds - n) / (rounds - n + 1)
        sft = alfworld_sft(ws, opts, ws.output / best, name, files, int(opts["alf_dagger_steps"]),
                           opts["alf_dagger_lr"], seed + 1 + n, sft_stop, threads)
        if sft is None:
            break
        scores[name] = submit(ws, name, deadline)
        best = better(scores, best, name)
    return scores


def is_webshop(ws: Workspace) -> bool:
    return (ws.data / "webshop_api").is_dir() and (ws.data / "sft_prompt_completion.jsonl").exists()


def webshop_main(ws: Workspace, opts: dict, deadline: float, seed: int, threads: int) -> dict | None:
    """With `ws_practice`, first that many practice instructions per shop product, played by the
    expert (webshop_practice.py; the steps of its won episodes join the SFT data); SFT on the
    expert's steps (lean_sft.py; loss on every token) -> v1; with `ws_dagger_episodes`, v1 plays
    that many train instructions and the expert labels the pages it reached (webshop_dagger.py);
    then SFT goes on from v1 over the expert's steps plus those labels -> v2."""
    reserve = opts["ws_submit_reserve_s"]
    left = deadline - time.time() - reserve
    if left < 30:
        log(f"not enough budget to train anything ({left:.0f}s after the submission reserve); stopping")
        return None
    files = [str(ws.data / "sft_prompt_completion.jsonl")]
    if int(opts["ws_practice"]) > 0:
        practice = ws.logs / "webshop_practice.jsonl"
        got = run_stage(ws, "webshop_practice.py", ["--data", str(ws.data), "--out", str(practice),
                                                    "--per_product", str(int(opts["ws_practice"])),
                                                    "--max_steps", str(int(opts["ws_max_steps"])), "--seed", str(seed)],
                        kill_at=time.time() + min(120.0, left / 10), threads=threads)
        if got and got.get("examples"):
            files.append(str(practice))
        left = deadline - time.time() - reserve
    focus_steps = int(opts["ws_focus_steps"])
    # `ws_permute` of the examples get their type's attributes and option values permuted (from the shop's catalog)
    catalog = (["--catalog", str(ws.data / "catalog.jsonl"), "--permute", str(opts["ws_permute"])]
               if (ws.data / "catalog.jsonl").exists() else [])

    def sft(model: Path, name: str, steps: int, lr: float, stop_at: float, prompt_weight: float, seed_: int):
        return run_stage(ws, "lean_sft.py", ["--model", str(model), "--out", str(ws.output / name),
                                                "--data", *files, "--steps", str(steps), "--lr", str(lr),
                                                "--batch", str(int(opts["ws_sft_batch"])),
                                                "--prompt_weight", str(prompt_weight),
                                                "--decisions", str(int(opts["ws_decisions"])),
                                                "--rename", str(opts["ws_rename"]), *catalog,
                                                "--seed", str(seed_), "--stop_at", str(stop_at)],
                         kill_at=stop_at + reserve / 2, threads=threads)

    v1_stop = time.time() + (1 - (opts["ws_focus_share"] if focus_steps > 0 else 0.0)) * left
    if sft(ws.model, "v1", int(opts["ws_sft_steps"]), opts["ws_sft_lr"], v1_stop, opts["ws_prompt_weight"], seed) is None:
        return None
    scores = {"v1": submit(ws, "v1", deadline)}
    episodes = int(opts["ws_dagger_episodes"])
    if episodes > 0 and deadline - reserve - time.time() > 60:
        labels = ws.logs / "webshop_dagger.jsonl"
        play_stop = time.time() + (deadline - reserve - time.time()) / 3
        got = run_stage(ws, "webshop_dagger.py", ["--model", str(ws.output / "v1"), "--data", str(ws.data),
                                                  "--out", str(labels), "--episodes", str(episodes),
                                                  "--max_steps", str(int(opts["ws_max_steps"])),
                                                  "--seed", str(seed), "--stop_at", str(play_stop)],
                        kill_at=play_stop + 60, threads=threads)
        if got and got.get("examples"):
            files.append(str(labels))
    if focus_steps > 0 and deadline - reserve - time.time() > 20:
        if sft(ws.output / "v1", "v2", focus_steps, opts["ws_focus_lr"], deadline - reserve,
               opts["ws_focus_prompt_weight"], seed + 1):
            scores["v2"] = submit(ws, "v2", deadline)
    return scores


def main(argv: list[str]) -> int:
    t_start = time.time()
    opts = parse_options(argv)
    ws = Workspace()
    deadline = ws.deadline()
    seed = ws.seed()
    reserve = opts["submit_reserve_s"]
    threads = int(opts["threads"])
    lora = ["--lora", str(int(opts["lora"]))] if opts["lora"] else []
    train = (f"ALFWorld train games in {ws.data}" if is_alfworld(ws)
             else f"WebShop train instructions in {ws.data}" if is_webshop(ws)
             else f"DeepSearchQA train questions in {ws.data}" if is_deepsearchqa(ws) else f"train {ws.train}")
    log(f"workspace {ws.root}; base model {ws.model}; {train}; seed {seed}; "
        f"{deadline - time.time():.0f}s of budget left")
    ws.output.mkdir(parents=True, exist_ok=True)
    write_code(ws)
    if is_alfworld(ws) or is_webshop(ws) or is_deepsearchqa(ws):
        main_of = alfworld_main if is_alfworld(ws) else webshop_main if is_webshop(ws) else deepsearchqa_main
        env_scores = main_of(ws, opts, deadline, seed, threads)
        if env_scores is None:
            return 1
        log("done: " + json.dumps({"scores": env_scores, "wall_s": round(time.time() - t_start, 1)}))
        return 0
    scores: dict[str, float | None] = {}

    # 1. SFT on demonstrations: most of the gain on what the teacher gets right.
    remaining = deadline - time.time() - reserve
    if remaining < 30:
        log("not enough budget to train anything; stopping")
        return 0
    sft_stop = time.time() + opts["sft_share"] * remaining
    sft = run_stage(ws, "sft.py", ["--model", str(ws.model), "--out", str(ws.output / "v1"), "--data", str(ws.train),
                                   "--steps", str(int(opts["sft_steps"])), "--lr", str(opts["sft_lr"]),
                                   "--batch", str(int(opts["sft_batch"])),
                                   "--teacher_share", str(opts["teacher_share"]), "--seed", str(seed),
                                   "--stop_at", str(sft_stop), *lora],
                    kill_at=deadline - reserve / 2, threads=threads)
    if sft is None:
        return 1
    scores["v1"] = submit(ws, "v1", deadline)
    best_name, best_score = "v1", scores["v1"]

    # 2. GRPO rounds from the best model while they still help and time allows.
    last_round_s, last_steps = None, 1
    version = 1
    for round_no in range(int(opts["grpo_rounds"])):
        steps = int(opts["grpo_steps"] if round_no == 0 else opts["more_grpo_steps"])
        remaining = deadline - time.time() - reserve
        need = 45.0 if last_round_s is None else last_round_s * steps / max(1, last_steps) + 10
        if remaining < need:
            log(f"stopping: {remaining:.0f}s left, a GRPO round needs about {need:.0f}s")
            break
        version += 1
        name = f"v{version}"
        t0 = time.time()
        grpo = run_stage(ws, "grpo.py", ["--model", str(ws.output / best_name), "--out", str(ws.output / name),
                                         "--data", str(ws.train), "--steps", str(steps), "--lr", str(opts["grpo_lr"]),
                                         "--beta", str(opts["grpo_beta"]), "--prompts", str(int(opts["grpo_prompts"])),
                                         "--gens", str(int(opts["grpo_gens"])), "--seed", str(seed + round_no),
                                         "--stop_at", str(deadline - reserve), *lora],
                         kill_at=deadline - reserve / 2, threads=threads)
        last_round_s, last_steps = time.time() - t0, max(1, (grpo or {}).get("steps", steps))
        if grpo is None:
            break
        scores[name] = submit(ws, name, deadline)
        if scores[name] is None:
            break
        if best_score is not None and scores[name] < best_score + opts["min_gain"]:
            log(f"stopping: GRPO round {round_no + 1} did not help ({scores[name]:.1f} vs best {best_score:.1f})")
            if scores[name] > best_score:
                best_name, best_score = name, scores[name]
            break
        best_name, best_score = name, scores[name]

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = {"scores": scores, "best": best_name, "best_score": best_score, "wall_s": round(time.time() - t_start, 1),
               "training_cpu_s": round(usage.ru_utime + usage.ru_stime, 1)}
    if ws.api:
        listing = ws.api.submissions()
        if "error" not in listing:
            summary["api_submissions"] = listing
    log("done: " + json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
