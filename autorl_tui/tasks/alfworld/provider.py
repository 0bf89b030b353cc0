"""Data provider for the `alfworld` task card: `materialize(card, split, out_dir) -> Path`.

A materialized split is a folder:

    <split>/items.jsonl        one line per game: id, gamefile (relative), task_type, goal, ...
    <split>/games/<type>/<id>/ game.tw-pddl, traj_data.json, expert.json (planner walkthrough)

and, for `train` only (the split copied into the agent's workspace):

    sft_chat.jsonl, sft_prompt_completion.jsonl, expert_trajectories.jsonl   expert data (chat)
    few_shot/<task_type>.txt                                               our ReAct examples
    (under AutoRL-Bench's protocol instead: sft_prompt_completion.jsonl and sft_react.jsonl in
    the grader's ReAct text, expert_trajectories.jsonl; no chat files, no few_shot/)
    alfworld_api/                                                          the episode runner
    README.md

Games are generated (see games.py) unless the official games are present ($ALFWORLD_DATA/json_2.1.1,
see official.py) and the card's `params.source` is `auto` or `official`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path

from autorl_tui.tasks.alfworld import games as G
from autorl_tui.tasks.alfworld.official import copy_official_game, official_games, official_root
from autorl_tui.tasks.alfworld.react import PROMPTS_ENV, PROMPTS_FILE, ReactPromptsError, prompts_path
from autorl_tui.tasks import kit

_log = logging.getLogger(__name__)
PACKAGE_DIR = Path(__file__).resolve().parent
# the workspace's alfworld_api/: these files beside the grader's generic runner (tasks/kit.py)
API_FILES = ("game.py", "prompts.py", "react.py", "api.py")


class AlfworldDataError(RuntimeError):
    pass


def _split_spec(card, split: str) -> dict:
    spec = dict(card.data["splits"][split])
    spec.setdefault("seed", {"train": 1, "dev": 2, "test": 3}.get(split, 0))
    spec.setdefault("n_per_type", 4)
    spec.setdefault("rooms", "unseen" if split == "test" else "seen")
    return spec


def _task_types(card) -> tuple[str, ...]:
    types = tuple((card.data.get("params") or {}).get("task_types") or G.TASK_TYPES)
    unknown = [t for t in types if t not in G.TASK_TYPES]
    if unknown:
        raise AlfworldDataError(f"unknown ALFWorld task type(s) {unknown}; known: {', '.join(G.TASK_TYPES)}")
    return types


def _official_root(card) -> Path | None:
    return official_root(data_home=getattr(card, "data_home", None))


def missing_games(card) -> str:
    return (f"task {card.id} needs the official ALFWorld games and none were found: run `alfworld-download` with "
            "ALFWORLD_DATA set to a folder (it makes json_2.1.1/ there), or put json_2.1.1/ in "
            f"<home>/data/{card.id}/; for the generated stand-in use the task alfworld-gen")


def available(card) -> str | None:
    """None when the card's games (and, under AutoRL-Bench's protocol, its prompt file) can be had
    here (generated games always can), else why not."""
    source = (card.data.get("params") or {}).get("source", "auto")
    if source == "official" and _official_root(card) is None:
        return missing_games(card)
    if (card.scorer_options or {}).get("react") == "autorl-bench" and not (card.scorer_options or {}).get("react_prompts"):
        home_copy = Path(card.data_home) / card.id / PROMPTS_FILE if getattr(card, "data_home", None) else None
        try:
            path = prompts_path(None, home_copy.parent if home_copy is not None and home_copy.is_file() else None)
        except ReactPromptsError as exc:
            return f"task {card.id}: {exc}"
        if not path.is_file():
            return (f"task {card.id}: AutoRL-Bench's ALFWorld prompt file {path} does not exist: run `autorl-tui data "
                    f"get {card.id}`, or set {PROMPTS_ENV} to your copy of react_prompts.json")
    return None


def source_fingerprint(card) -> str:
    """The official games' folder when they would be used, else "", and under AutoRL-Bench's
    protocol the prompt file's sha256 (its worked examples are in the train split's SFT text)."""
    source = (card.data.get("params") or {}).get("source", "auto")
    root = _official_root(card) if source != "generated" else None
    games = f"official:{root.resolve()}" if root is not None else ""
    prompts = react_prompts_file(card)
    return games + (f";react_prompts:{hashlib.sha256(prompts.read_bytes()).hexdigest()}" if prompts else "")


def materialize(card, split: str, out_dir: Path, log=_log.info) -> Path:
    out_dir = Path(out_dir)
    final = out_dir / split
    if (final / "items.jsonl").exists():
        place_react_prompts(card, final)
        return final
    params = dict(card.data.get("params") or {})
    source = params.get("source", "auto")
    if source not in ("auto", "generated", "official"):
        raise AlfworldDataError(f"task {card.id}: data.params.source must be auto, generated or official, got {source!r}")
    root = _official_root(card) if source != "generated" else None
    if source == "official" and root is None:
        raise AlfworldDataError(missing_games(card))
    work = out_dir / f".{split}.partial"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spec = _split_spec(card, split)
    types = _task_types(card)
    if root is not None:
        items = _official_items(root, split, spec, types, work, log)
    else:
        exclude = set()
        if split != "train" and spec["rooms"] == "seen" and "train" in card.data["splits"]:
            train = _split_spec(card, "train")
            exclude = G.planned_signatures(seed=train["seed"], rooms_kind=train["rooms"],
                                           max_receptacles=int(params.get("max_receptacles", 12)),
                                           n_candidates=2 * int(train["n_per_type"]) + 10, task_types=types)
        items = G.build_games(work, seed=int(spec["seed"]), n_per_type=int(spec["n_per_type"]),
                              rooms_kind=spec["rooms"], max_receptacles=int(params.get("max_receptacles", 12)),
                              task_types=types, exclude=exclude, log=log)
        for item in items:
            item["source"] = "generated"
    with open(work / "items.jsonl", "w") as fh:
        for item in items:
            fh.write(json.dumps(item) + "\n")
    if split == "train":
        add_workspace_extras(card, work, items)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(work, final)
    place_react_prompts(card, final)
    return final


def place_react_prompts(card, split_dir: Path) -> None:
    """AutoRL-Bench's prompt file, when `autorl-tui data get alfworld` fetched it into the home,
    copied beside the split's games (where the grader's autorl-bench protocol reads it)."""
    home = getattr(card, "data_home", None)
    src = Path(home) / card.id / "react_prompts.json" if home is not None else None
    if src is None or not src.is_file():
        return
    dest = split_dir / "react_prompts.json"
    if not dest.is_file() or dest.read_bytes() != src.read_bytes():
        tmp = split_dir / f".react_prompts.{os.getpid()}.tmp"
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)


def _official_items(root: Path, split: str, spec: dict, types, work: Path, log) -> list[dict]:
    items = []
    for game_dir in official_games(root, split, types, spec.get("official_n_per_type")):
        traj = json.loads((game_dir / "traj_data.json").read_text())
        gid = f"{game_dir.parent.name}/{game_dir.name}"
        dest = work / "games" / traj["task_type"] / game_dir.parent.name / game_dir.name
        gamefile = copy_official_game(game_dir, dest)
        item = {"id": gid, "gamefile": os.path.relpath(gamefile, work), "task_type": traj["task_type"],
                "floorplan": traj.get("scene", {}).get("floor_plan"), "source": "official"}
        if split == "train":   # expert data for the workspace: the planner's walkthrough
            expert = G.validate_game(gamefile)
            if not expert.won:
                log(f"skip {gid}: the planner's walkthrough does not win")
                shutil.rmtree(dest)
                continue
            (dest / "expert.json").write_text(json.dumps({"intro": expert.intro, "raw_intro": expert.raw_intro,
                                                          "steps": expert.steps, "won": True}))
            item["expert_actions"] = expert.actions
        items.append(item)
    return items


def react_prompts_file(card) -> Path | None:
    """AutoRL-Bench's prompt file for a card under its protocol (the `react_prompts` option,
    $ALFWORLD_REACT_PROMPTS, the home's copy, $ALFWORLD_DATA), or None when there is none."""
    opts = card.scorer_options or {}
    if opts.get("react") != "autorl-bench":
        return None
    home = Path(card.data_home) / card.id if getattr(card, "data_home", None) else None
    try:
        path = prompts_path(opts.get("react_prompts"), home if home is not None and (home / PROMPTS_FILE).is_file()
                            else None)
    except ReactPromptsError:
        return None
    return path if path.is_file() else None


def add_workspace_extras(card, split_dir: Path, items: list[dict]) -> None:
    """What the agent gets beside the train games: expert SFT data (under AutoRL-Bench's protocol
    in its ReAct text, else in the harness's chat with few-shot examples), the API."""
    from autorl_tui.tasks.alfworld.experts import write_react_sft_files, write_sft_files
    from autorl_tui.tasks.alfworld.prompts import FEW_SHOT
    from autorl_tui.tasks.alfworld.react import load_prompts
    opts = dict(card.scorer_options or {})
    if opts.get("react") == "autorl-bench":
        path = react_prompts_file(card)
        if path is None:
            raise AlfworldDataError(available(card) or f"task {card.id}: AutoRL-Bench's prompt file is missing")
        counts = write_react_sft_files(split_dir, items, split_dir, load_prompts(str(path)))
        files = "sft_prompt_completion.jsonl (the grader's ReAct text per step), sft_react.jsonl (per game)"
    else:
        counts = write_sft_files(split_dir, items, split_dir, few_shot=bool(opts.get("few_shot", False)),
                                 history_len=int(opts.get("history_len", 5)))
        files = "sft_chat.jsonl, sft_prompt_completion.jsonl; ReAct examples in few_shot/"
        shots = split_dir / "few_shot"
        shots.mkdir(exist_ok=True)
        for task_type, text in FEW_SHOT.items():
            (shots / f"{task_type}.txt").write_text(text + "\n")
    kit.agent_package(split_dir / "alfworld_api", [PACKAGE_DIR / name for name in API_FILES], {
        "api": ["EpisodeResult", "list_games", "run_episodes"],
        "game": ["AlfworldGame", "Observation", "ensure_alfworld_data"],
        "prompts": ["FEW_SHOT", "build_messages", "match_action", "messages_to_text", "parse_reply"]},
        "ALFWorld episode runner")
    (split_dir / "README.md").write_text(
        f"# ALFWorld train split\n\n{len(items)} games in games/ (index: items.jsonl); "
        f"{counts['sft_examples']} expert steps as SFT data ({files}); "
        "raw expert trajectories in expert_trajectories.jsonl; "
        "the episode runner in alfworld_api/ (see the task description).\n")



def check_split(card, split: str, path: Path) -> list[tuple[str, str]]:
    """`tasks validate`'s task-specific check of a materialized split: every indexed game is on
    disk in the engine's format (game.tw-pddl with traj_data.json beside it) with a known task type."""
    problems = []
    items = [json.loads(line) for line in (path / "items.jsonl").read_text().splitlines() if line.strip()]
    missing = [str(it.get("id")) for it in items if not (path / str(it.get("gamefile", ""))).is_file()
               or not (path / str(it.get("gamefile", ""))).with_name("traj_data.json").is_file()]
    if missing:
        problems.append((f"{len(missing)} game(s) of items.jsonl are not on disk (e.g. {', '.join(missing[:3])})",
                         "materialize the split again (delete its folder in the cache)"))
    unknown = sorted({str(it.get("task_type")) for it in items} - set(G.TASK_TYPES))
    if unknown:
        problems.append((f"unknown task type(s) {unknown}", f"use ALFWorld's: {', '.join(G.TASK_TYPES)}"))
    return problems
