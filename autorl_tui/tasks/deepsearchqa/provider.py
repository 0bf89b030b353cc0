"""Data provider for the `deepsearchqa` card: `materialize(card, split, out_dir) -> Path`.

A materialized split is a folder:

    <split>/items.jsonl     one question per line: id, question, answers, answer_type, question_type, ...
    <split>/corpus.jsonl    the articles the local search index is built from (generated data)

and, for `train` only (the split copied into the agent's workspace): the expert's trajectories
as SFT data (sft_chat.jsonl, sft_prompt_completion.jsonl, expert_trajectories.jsonl), the episode
runner (deepsearchqa_api/: the grader's own prompts, tools and scoring) and a README.

Generated unless `DEEPSEARCHQA_PATH` names the official CSV and `params.source` is auto/official.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from autorl_tui.tasks.deepsearchqa import corpus as C
from autorl_tui.tasks.deepsearchqa.official import CUTS, ENV, official_file, official_split
from autorl_tui.tasks import kit

PACKAGE_DIR = Path(__file__).resolve().parent
# the workspace's deepsearchqa_api/: these files beside the grader's generic runner (tasks/kit.py)
API_FILES = ("api.py", "tool_loop.py", "prompts.py", "react.py", "search.py", "scoring.py", "experts.py")
WORLD_KEYS = ("countries", "cities_per_country", "companies_per_city", "people_per_city")


class DeepSearchQADataError(RuntimeError):
    pass


def _params(card) -> dict:
    return dict(card.data.get("params") or {})


def _source(card) -> Path | None:
    """The official CSV when it is to be used, else None (generated data)."""
    source = _params(card).get("source", "auto")
    if source not in ("auto", "generated", "official"):
        raise DeepSearchQADataError(f"task {card.id}: data.params.source must be auto, generated or official, got {source!r}")
    home = getattr(card, "data_home", None)
    path = official_file(Path(home) / card.id if home is not None else None) if source != "generated" else None
    if source == "official" and path is None:
        raise DeepSearchQADataError(f"task {card.id} needs the official DeepSearchQA questions and none were found: "
                                    f"run `autorl-tui data get {card.id}`, or set {ENV} to DSQA-full.csv (or the "
                                    "folder holding it); for the offline stand-in use the task deepsearchqa-gen")
    return path


def available(card) -> str | None:
    try:
        _source(card)
    except DeepSearchQADataError as exc:
        return str(exc)
    return None


def source_fingerprint(card) -> str:
    try:
        path = _source(card)
    except DeepSearchQADataError:
        return ""
    return f"official:{path.resolve()}" if path is not None else ""


def build_split(card, split: str) -> tuple[list[dict], list[dict]]:
    """(questions, corpus) of a split; the corpus is empty for official questions."""
    params = _params(card)
    spec = dict(card.data["splits"][split])
    path = _source(card)
    if path is not None:
        sizes = {name: s.get("official_n", {"train": 100, "dev": 100, "test": 200}[name])
                 for name, s in card.data["splits"].items()}
        cut = params.get("cut", "autorl-bench")
        if cut not in CUTS:
            raise DeepSearchQADataError(f"task {card.id}: data.params.cut must be one of {', '.join(CUTS)}, got {cut!r}")
        return official_split(path, split, sizes, cut), []
    if split not in C.REGIONS:
        raise DeepSearchQADataError(f"task {card.id}: generated DeepSearchQA has splits {', '.join(C.REGIONS)}, not {split!r}")
    world = C.build_world(int(params.get("world_seed", 0)), **{k: int(params[k]) for k in WORLD_KEYS if k in params})
    questions = C.build_questions(world, split, int(spec.get("n", 50)), int(spec.get("seed", 0)))
    for q in questions:
        q["source"] = "generated"
    return questions, C.build_corpus(world, int(params.get("world_seed", 0)))


def _write_jsonl(path: Path, rows) -> None:
    with open(path, "w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")


def materialize(card, split: str, out_dir: Path) -> Path:
    out_dir = Path(out_dir)
    final = out_dir / split
    if (final / "items.jsonl").exists():
        return final
    questions, docs = build_split(card, split)
    work = out_dir / f".{split}.partial-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    _write_jsonl(work / "items.jsonl", questions)
    if docs:
        _write_jsonl(work / "corpus.jsonl", docs)
    if split == "train":
        add_workspace_extras(card, work, questions, docs)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(work, final)
    return final


def add_workspace_extras(card, split_dir: Path, questions: list[dict], docs: list[dict]) -> None:
    """Beside the train questions: the expert's trajectories as SFT data and the episode runner."""
    from autorl_tui.tasks.deepsearchqa.experts import write_sft_files
    kit.agent_package(split_dir / "deepsearchqa_api", [PACKAGE_DIR / name for name in API_FILES], {
        "api": ["EpisodeResult", "list_questions", "load_corpus", "open_backend", "run_episodes",
                "run_react_episodes"],
        "tool_loop": ["SearchEpisode"], "experts": ["ExpertPolicy", "expert_script"],
        "prompts": ["SYSTEM_PROMPT", "build_messages", "messages_to_text", "parse_reply"],
        "scoring": ["score_answer"]}, "DeepSearchQA episode runner")
    if not docs:        # official questions: no corpus, so no expert to play them
        (split_dir / "README.md").write_text(
            f"# DeepSearchQA train split\n\n{len(questions)} official questions (items.jsonl: question, answers, "
            "answer_type, answer_raw, answer_type_label, question_type); no corpus and no expert trajectories "
            "(the questions need web search). The grader plays AutoRL-Bench's ReAct loop: "
            "deepsearchqa_api/react.py and run_react_episodes in deepsearchqa_api/api.py (see the task description).\n")
        return
    counts = write_sft_files(split_dir, questions, docs, dict(card.scorer_options or {}),
                             max_steps=int(card.protocol.max_steps or 12))
    (split_dir / "README.md").write_text(
        f"# DeepSearchQA train split\n\n{len(questions)} questions (items.jsonl: question, answers, answer_type, "
        f"question_type, subjects, chain of document ids); {len(docs)} articles (corpus.jsonl). "
        f"Expert trajectories: {counts['won']}/{counts['episodes']} answered right, {counts['steps']} steps, as SFT "
        "data in sft_chat.jsonl and sft_prompt_completion.jsonl (one example per step, the grader's exact prompt), "
        "raw in expert_trajectories.jsonl. The episode runner is deepsearchqa_api/ (see the task description).\n")


def check_split(card, split: str, path: Path) -> list[tuple[str, str]]:
    """`tasks validate`'s DeepSearchQA checks of a materialized split: every question has gold
    answers, and (generated data) every document of its lookup chain is in the split's corpus."""
    problems = []
    items = [json.loads(line) for line in (path / "items.jsonl").read_text().splitlines() if line.strip()]
    empty = [str(it.get("id")) for it in items if not it.get("answers") or not it.get("question")]
    if empty:
        problems.append((f"{len(empty)} question(s) without a question or gold answers (e.g. {', '.join(empty[:3])})",
                         "materialize the split again (delete its folder in the cache), or fix the official CSV"))
    corpus = path / "corpus.jsonl"
    if corpus.exists():
        docs = {json.loads(line)["doc_id"] for line in corpus.read_text().splitlines() if line.strip()}
        broken = [str(it.get("id")) for it in items if not set(it.get("chain") or []) <= docs]
        if broken:
            problems.append((f"{len(broken)} question(s) whose lookup chain is not in corpus.jsonl "
                             f"(e.g. {', '.join(broken[:3])})", "materialize the split again (delete its folder in the cache)"))
    return problems
