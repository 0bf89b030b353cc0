"""`alpaca_eval` scorer: AlpacaEval 2.0 scored by the field's own library, `alpaca-eval` (PyPI).

The policy answers each item's instruction; alpaca-eval's `PairwiseAnnotator` compares every
answer with the item's reference output through the annotator configuration the card names (one
of alpaca-eval's own, e.g. `alpaca_eval_gpt4_turbo_fn`, the ranking function-calling annotator
AutoRL-Bench runs as gpt-5.2, or `weighted_alpaca_eval_gpt4_turbo`), and its
`get_length_controlled_winrate` turns the annotations into the win rate and the length-controlled
win rate (`length_controlled_v1`: a cross-validated, L1-penalized logistic GLM regularized
towards alpaca-eval's gamed baselines). Nothing of that is re-implemented here: this module
builds the inputs alpaca-eval's own `evaluate` builds (the references as `outputs_1`, the model's
as `outputs_2`, in the split's order) and reads its outputs back into samples.

Where alpaca-eval reaches out:
- the judge: its OpenAI decoder is pointed at `judge_url` (or $AUTORL_JUDGE_URL) through a client
  configuration file written into the evaluation's private scratch folder (the key, read from
  `api_key_env`, is written there mode 0600 and nowhere else);
- the hub: the GLM downloads `df_gamed.csv` from tatsu-lab/alpaca_eval on every call; we hand it
  the copy `autorl-tui data get alpacaeval` verified (the provider puts it in the split's folder), so
  grading needs no network besides the judge.

Options: annotators_config (an alpaca-eval config name), annotator_name (the name recorded in
the annotations), judge_model (replaces the config's model_name), judge_url, api_key_env,
max_concurrency (5), glm (length_controlled_v1), generator (the candidate's name, "model").
"""

from __future__ import annotations

import contextlib
import copy
import getpass
import math
import os
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import yaml

from autorl_tui import settings
from autorl_tui.grading import context_budget
from autorl_tui.grading.scorers.judge import instruction_prompts
from autorl_tui.grading.types import EvalProtocol, EvalResult, Policy, SampleResult, ScorerContext

GAMED_FILE = "df_gamed.csv"
_HUB_LOCK = threading.Lock()


def _alpaca_eval():
    try:      # alpaca-eval reads the user's name when imported; the sandboxed grader's uid has no passwd entry
        getpass.getuser()
    except (KeyError, OSError):
        os.environ["USER"] = f"uid{os.getuid()}"
    try:
        with warnings.catch_warnings():    # its `import pkg_resources` warns on every import
            warnings.simplefilter("ignore", UserWarning)
            import alpaca_eval.annotators  # noqa: F401  (imports the package and its decoders)
            import alpaca_eval.metrics.glm_winrate
    except ImportError as exc:
        raise ValueError(f"the alpaca_eval scorer needs the `alpaca-eval` package ({exc}); install the tasks "
                         "extra: pip install -e '.[tasks]'") from None
    return alpaca_eval


def packaged_config(name: str) -> tuple[dict, Path]:
    """One of alpaca-eval's own annotator configurations: (its entry, its folder)."""
    folder = Path(_alpaca_eval().__file__).parent / "evaluators_configs" / name
    path = folder / "configs.yaml"
    if not path.is_file():
        raise ValueError(f"alpaca-eval has no annotator configuration {name!r} (looked for {path}); name one of "
                         "its evaluators_configs, e.g. alpaca_eval_gpt4_turbo_fn")
    configs = yaml.safe_load(path.read_text())
    if not isinstance(configs, dict) or len(configs) != 1:
        raise ValueError(f"{path}: expected one annotator configuration")
    return next(iter(configs.values())), folder


def write_annotator_config(opts: dict, out: Path) -> tuple[Path, str, str]:
    """The card's annotator as an alpaca-eval configuration file under `out`: alpaca-eval's own
    configuration, its model replaced by `judge_model` and its client pointed at `judge_url`.
    Returns (the file, the annotator's name, the judge model)."""
    url = opts.get("judge_url") or settings.current().judge_url
    if not url:
        raise ValueError("the alpaca_eval scorer needs an OpenAI-compatible judge endpoint: set scorer option "
                         "judge_url (command line: --judge-url http://HOST:PORT/v1) or $AUTORL_JUDGE_URL")
    name = str(opts.get("annotators_config") or "alpaca_eval_gpt4_turbo_fn")
    entry, folder = packaged_config(name)
    entry = copy.deepcopy(entry)
    template = Path(str(entry["prompt_template"]))
    entry["prompt_template"] = str(folder.parent / template)      # configs name it relative to their parent
    kwargs = entry.setdefault("completions_kwargs", {})
    if opts.get("judge_model"):
        kwargs["model_name"] = str(opts["judge_model"])
    key = None
    if opts.get("api_key_env"):
        key = os.environ.get(str(opts["api_key_env"]))
        from autorl_tui.grading.judge_client import _is_loopback
        if not key and not _is_loopback(url):
            raise ValueError(f"the judge's API key is read from ${opts['api_key_env']}, which is not set; export "
                             f"{opts['api_key_env']}=... (or set scorer option api_key_env: null for a keyless "
                             "endpoint)")
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    clients = out / "client_configs.yaml"
    fd = os.open(clients, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump({"default": [{"api_key": key or "no-key", "base_url": url.rstrip("/")}]}, fh)
    kwargs["client_config_path"] = str(clients)
    if opts.get("max_concurrency"):
        kwargs["num_procs"] = int(opts["max_concurrency"])
    annotator = str(opts.get("annotator_name") or name)
    config_dir = out / annotator
    config_dir.mkdir(exist_ok=True)
    (config_dir / "configs.yaml").write_text(yaml.safe_dump({annotator: entry}, sort_keys=False))
    return config_dir / "configs.yaml", annotator, str(kwargs.get("model_name"))


@contextlib.contextmanager
def local_hub_files(folder: Path):
    """alpaca-eval's GLM, with its hub downloads answered from `folder` (the verified copies)."""
    glm = _alpaca_eval().metrics.glm_winrate

    def from_folder(repo_id: str, filename: str, **_kw) -> str:
        path = Path(folder) / filename
        if not path.is_file():
            raise ValueError(f"alpaca-eval's length-controlled win rate needs {filename} ({repo_id}); expected it at "
                             f"{path}: run `autorl-tui data get alpacaeval`")
        return str(path)

    with _HUB_LOCK:
        original = glm.hf_hub_download
        glm.hf_hub_download = from_folder
        try:
            yield glm
        finally:
            glm.hf_hub_download = original


def glm_folder(split_path: Path) -> Path:
    """Where a split keeps the GLM's file: in the split's folder (or beside a split file)."""
    return split_path if split_path.is_dir() else split_path.parent


def lc_metrics(annotations: list[dict], gamed_folder: Path, glm_name: str = "length_controlled_v1") -> dict:
    """alpaca-eval's own metrics on alpaca-eval-format annotations (win rate, LC win rate, counts)."""
    with local_hub_files(gamed_folder) as glm:
        metrics = glm.get_length_controlled_winrate(list(annotations), glm_name=glm_name, save_weights_dir=None,
                                                    is_add_glm_preference_inplace=False)
    return {k: _plain(v) for k, v in metrics.items()}


def _plain(value: Any) -> Any:
    """numpy/pandas scalars (alpaca-eval's counts are int64) as Python numbers, for JSON."""
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _outcome(preference: Any) -> float | None:
    """alpaca-eval's preference (1 reference, 2 candidate, 1.5 tie; NaN unparsed) as a 0..1 outcome."""
    try:
        p = float(preference)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(p) else p - 1.0


class AlpacaEvalScorer:
    name = "alpaca_eval"
    version = "1"
    item_fields = ("id", "prompt", "reference")

    def evaluate(self, policy: Policy, items: list[dict], protocol: EvalProtocol,
                 ctx: ScorerContext) -> EvalResult:
        opts = dict(ctx.options or {})
        if not items:
            raise ValueError("alpaca_eval: no items to evaluate (is the split empty?)")
        for item in items:
            missing = [k for k in self.item_fields if k not in item]
            if missing:
                raise ValueError(f"alpaca_eval: item {item.get('id', '?')} lacks {', '.join(missing)}")
        gamed = glm_folder(Path(ctx.split_path))
        if not (gamed / GAMED_FILE).is_file():
            raise ValueError(f"alpaca_eval: {GAMED_FILE} is not in the split's folder ({gamed}); the alpacaeval data "
                             "provider puts it there from `autorl-tui data get alpacaeval`")
        config, annotator_name, judge_model = write_annotator_config(opts, Path(ctx.scratch_dir) / "alpaca_eval")
        ae = _alpaca_eval()
        t0 = time.monotonic()
        completions = policy.generate(instruction_prompts(items, protocol), n=1, temperature=protocol.temperature, top_p=protocol.top_p,
                                      max_tokens=protocol.max_tokens, stop=protocol.stop)
        if len(completions) != len(items) or any(not c for c in completions):
            raise ValueError(f"alpaca_eval: the policy returned {len(completions)} completion lists for "
                             f"{len(items)} prompts")
        t_gen = time.monotonic()
        generator = str(opts.get("generator") or "model")
        outputs = [c[0].text.strip() for c in completions]       # AutoRL-Bench strips the generated text
        references = [{"instruction": it["prompt"], "output": it["reference"],
                       "generator": it.get("reference_generator", "reference"), "dataset": it.get("dataset", "")}
                      for it in items]
        model_outputs = [{"instruction": it["prompt"], "output": out, "generator": generator,
                          "dataset": it.get("dataset", "")} for it, out in zip(items, outputs)]
        ctx.progress(0, len(items), "judgments")
        try:
            annotator = ae.annotators.PairwiseAnnotator(annotators_config=str(config), caching_path=None)
            annotations = annotator.annotate_head2head(outputs_1=references, outputs_2=model_outputs)
        except ValueError:
            raise
        except Exception as exc:   # alpaca-eval's and the openai client's errors, said in one line
            raise RuntimeError(f"alpaca-eval's annotator failed: {type(exc).__name__}: {str(exc)[:300]}") from None
        ctx.progress(len(items), len(items), "judgments")
        t_judge = time.monotonic()
        metrics = lc_metrics(annotations, gamed, str(opts.get("glm") or "length_controlled_v1"))
        by_instruction = {a["instruction"]: a for a in annotations}
        samples = []
        for item, comp, out in zip(items, completions, outputs):
            ann = by_instruction.get(item["prompt"], {})
            outcome = _outcome(ann.get("preference"))
            sample = SampleResult(str(item["id"]), prompt=item["prompt"], output=out, expected=item["reference"],
                                  tokens=comp[0].tokens, score=outcome,
                                  data={"preference": _plain(ann.get("preference")),
                                        "judge_reply": str(ann.get("preference_raw_completion") or "")[:500]})
            if outcome is None:
                sample.failure_kind = "runtime_error"
                sample.error = "alpaca-eval's annotator gave no preference (judge reply not parsed or missing)"
            else:
                sample.correct = outcome == 1.0
                sample.failure_kind = "wrong_answer" if outcome == 0.0 else None
                if not out:
                    sample.failure_kind = "empty"
                elif comp[0].finish_reason == "length" and outcome == 0.0:
                    sample.failure_kind = "truncated"
                sample.data["outcome"] = {1.0: "win", 0.5: "tie", 0.0: "loss"}.get(outcome, "partial")
            if context_budget.refused(comp[0]):     # judged as the empty output it is, the reason kept
                sample.failure_kind, sample.error = context_budget.REFUSED, context_budget.refused(comp[0])
            samples.append(sample)
        lc = metrics.get("length_controlled_winrate")
        result_metrics = {
            "lc_win_rate": lc, "win_rate": metrics.get("win_rate"),
            "standard_error": metrics.get("standard_error"), "lc_standard_error": metrics.get("lc_standard_error"),
            "discrete_win_rate": metrics.get("discrete_win_rate"),
            "n_wins": metrics.get("n_wins"), "n_wins_base": metrics.get("n_wins_base"),
            "n_draws": metrics.get("n_draws"), "n_total": metrics.get("n_total"), "n_items": len(items),
            "n_unannotated": sum(1 for s in samples if s.score is None),
            "avg_length": int(sum(len(o) for o in outputs) / len(outputs)),
            "annotator": annotator_name, "judge_model": judge_model,
            "annotators_config": str(opts.get("annotators_config") or "alpaca_eval_gpt4_turbo_fn"),
            "glm": str(opts.get("glm") or "length_controlled_v1"),
            "alpaca_eval_version": _version(),
            "judge_price_usd": _price(annotations),
        }
        score = float(lc) if lc is not None and not math.isnan(float(lc)) else float("nan")
        if math.isnan(score):
            raise RuntimeError("alpaca-eval's length-controlled win rate is undefined (no annotation had a "
                               "preference: is the judge answering?)")
        return EvalResult(score=score, metrics=result_metrics, samples=samples,
                          timings={"inference_s": t_gen - t0, "scoring_s": t_judge - t_gen})

    def validate_options(self, options: dict, task_dir: Path) -> list[tuple[str, str]]:
        problems = []
        try:
            packaged_config(str(options.get("annotators_config") or "alpaca_eval_gpt4_turbo_fn"))
        except ValueError as exc:
            problems.append((str(exc), "name one of alpaca-eval's annotator configurations"))
        if not options.get("judge_model"):
            problems.append(("scorer_options.judge_model is not set", "name the judge model, e.g. judge_model: gpt-5.2"))
        return problems


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("alpaca-eval")
    except PackageNotFoundError:
        return "unknown"


def _price(annotations: list[dict]) -> float | None:
    prices = [a.get("preference_price_per_example") for a in annotations]
    known = [float(p) for p in prices if isinstance(p, (int, float)) and not math.isnan(float(p))]
    return sum(known) if known else None
