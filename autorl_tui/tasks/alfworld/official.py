"""The official ALFWorld games, when a copy is on this machine (`alfworld-download` layout).

`$ALFWORLD_DATA/json_2.1.1/{train,valid_seen,valid_unseen}/<task>/<trial>/{traj_data.json,game.tw-pddl}`.
Splits follow the literature: train -> train, dev -> valid_seen, test -> valid_unseen.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

OFFICIAL_SPLITS = {"train": "train", "dev": "valid_seen", "test": "valid_unseen"}


def official_root(env_value: str | None = None, data_home: Path | None = None) -> Path | None:
    """The json_2.1.1 folder under ALFWORLD_DATA, else under `<data_home>/alfworld/` (the home's data
    folder), or None when the official games are in neither."""
    value = env_value if env_value is not None else os.environ.get("ALFWORLD_DATA", "")
    candidates = [Path(value).expanduser()] if value else []
    if data_home is not None:
        candidates.append(Path(data_home) / "alfworld")
    for folder in candidates:
        root = folder / "json_2.1.1"
        if (root / "valid_unseen").is_dir():
            return root
    return None


def official_games(root: Path, split: str, task_types: tuple[str, ...], n_per_type: int | None) -> list[Path]:
    """Game folders of a split, filtered as AlfredTWEnv does (solvable, no movable/sliced), sorted."""
    folder = root / OFFICIAL_SPLITS[split]
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} does not exist: the official ALFWorld data looks incomplete")
    picked: dict[str, list[Path]] = {t: [] for t in task_types}
    for traj in sorted(folder.glob("*/*/traj_data.json")):
        game_dir = traj.parent
        if "movable" in str(game_dir) or "Sliced" in str(game_dir) or not (game_dir / "game.tw-pddl").exists():
            continue
        task_type = json.loads(traj.read_text()).get("task_type")
        if task_type not in picked or (n_per_type and len(picked[task_type]) >= n_per_type):
            continue
        if not json.loads((game_dir / "game.tw-pddl").read_text()).get("solvable", False):
            continue
        picked[task_type].append(game_dir)
    return [d for t in task_types for d in picked[t]]


def copy_official_game(game_dir: Path, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("game.tw-pddl", "traj_data.json"):
        shutil.copy2(game_dir / name, dest / name)
    return dest / "game.tw-pddl"
