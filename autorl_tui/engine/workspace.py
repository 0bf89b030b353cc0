"""Builds a run's workspace exactly as the workspace contract says (DESIGN §3).

The base model and the train split are placed read-only (hardlinked when the agent runs sandboxed
or in a container, where models/ and data/ are read-only mounts over harness-owned files; copied
for an unisolated agent, so that it can never change the cached originals). Only `train` is ever placed here."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path


from autorl_tui.catalog.tasks import TaskCard
from autorl_tui.durations import format_duration
from autorl_tui.safe_files import write_replace

INSTRUCTIONS_TEMPLATE = Path(__file__).resolve().parents[1] / "builtin" / "prompts" / "instructions.md.j2"
AGENT_WRITABLE = ("code", "output", "logs", ".home")


@dataclass
class Workspace:
    root: Path
    model_name: str

    @property
    def code(self) -> Path:
        return self.root / "code"

    @property
    def output(self) -> Path:
        return self.root / "output"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def model_dir(self) -> Path:
        return self.root / "models" / self.model_name

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def run_meta(self) -> Path:
        return self.root / "run_meta.json"

    @property
    def metrics_file(self) -> Path:
        return self.logs / "metrics.jsonl"


def _place_tree(src: Path, dst: Path, link: bool) -> None:
    """Copy (or hardlink) src into dst, owned by the harness."""
    if src.is_file():
        dst.parent.mkdir(parents=True, exist_ok=True)
        _place_file(src, dst, link)
        return
    for dirpath, _dirnames, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in filenames:
            _place_file(Path(dirpath) / name, dst / rel / name, link)
    for dirpath, _dirnames, _filenames in os.walk(dst):
        os.chmod(dirpath, 0o755)


def _place_file(src: Path, dst: Path, link: bool) -> None:
    # Read-only by ownership (root-owned when the agent runs as another user) and, in containers,
    # by a read-only mount. The mode stays 0644 so that an agent's own *copy* (shutil.copytree)
    # is writable for it.
    if link:
        try:
            os.link(src, dst)
            os.chmod(dst, 0o644)
            return
        except OSError:
            pass
    shutil.copyfile(src, dst)
    os.chmod(dst, 0o644)


def render_instructions(card: TaskCard, model_name: str, budget_s: float, start: float, deadline: float,
                        data_files: list[str]) -> str:
    import jinja2      # here: only a workspace being built needs it (0.1 s of imports)

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    template = env.from_string(INSTRUCTIONS_TEMPLATE.read_text())
    cap_parts = []
    if card.submission_cap.get("max_count"):
        cap_parts.append(f"at most {card.submission_cap['max_count']} submissions")
    if card.submission_cap.get("min_interval_s"):
        cap_parts.append(f"at most one every {format_duration(card.submission_cap['min_interval_s'])}")
    iso = lambda t: datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")  # noqa: E731
    return template.render(task_id=card.id, level=card.level, model_name=model_name,
                           budget_human=format_duration(budget_s), start_iso=iso(start),
                           deadline_iso=iso(deadline), deadline=int(deadline), data_files=data_files,
                           cap=", ".join(cap_parts))


def build_workspace(root: Path, *, card: TaskCard, model_name: str, model_path: Path, train_path: Path,
                    link: bool) -> Workspace:
    """Lay out a fresh workspace. Budget-dependent files are written by `write_run_meta` at agent start.
    The executor gives the writable folders to the agent's user when it starts the agent."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    ws = Workspace(root=root, model_name=model_name)
    for d in ("code", "output", "logs", ".home", "models", "data"):
        (root / d).mkdir()
    _place_tree(model_path, ws.model_dir, link)
    if train_path.is_dir():
        _place_tree(train_path, ws.data, link)
    else:
        _place_tree(train_path, ws.data / "train.jsonl", link)
    os.chmod(ws.data, 0o755)
    os.chmod(root / "models", 0o755)
    for extra in card.workspace_files:
        src = card.dir / extra
        if src.exists():
            _place_tree(src, root / Path(extra).name, link)
    (root / "description.md").write_text(card.description)
    os.chmod(root / "description.md", 0o444)
    return ws


def data_files(ws: Workspace) -> list[str]:
    # data/ is harness-owned (read-only to the agent): listing it follows nothing the agent made
    return sorted(str(p.relative_to(ws.root)) for p in ws.data.rglob("*") if p.is_file())[:20]


def write_run_meta(ws: Workspace, *, card: TaskCard, budget_s: float, start: float, deadline: float,
                   seed: int = 0, last_submit_time: float | None = None) -> str:
    """(Re)write run_meta.json and instructions.md; returns the instructions' text.

    The workspace root is the agent's: it may have planted links at these names or at any
    temporary name, so both go through `write_replace` (never through a link)."""
    # AutoRL-Bench's four fields as it writes them (whole seconds, `end_time` null while the run
    # goes on: its instructions have agents do integer arithmetic on them), then ours
    meta = {"start_time": int(start), "timeout_s": int(budget_s),
            "last_submit_time": None if last_submit_time is None else int(last_submit_time), "end_time": None,
            "task": card.id, "seed": seed, "deadline": deadline}
    instructions = render_instructions(card, ws.model_name, budget_s, start, deadline, data_files(ws))
    write_replace(ws.root, ws.run_meta.name, (json.dumps(meta, indent=2) + "\n").encode(), mode=0o444)
    write_replace(ws.root, "instructions.md", instructions.encode(), mode=0o444)
    return instructions


def agent_environment(ws: Workspace, *, task_id: str, grading_url: str, deadline: float, seed: int,
                      gpus: list[str], passthrough: dict[str, str], python_bin_dir: str) -> dict[str, str]:
    """The agent's complete environment: the contract variables and the spec's names, nothing else."""
    env = {
        "PATH": f"{python_bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(ws.root / ".home"),
        "LANG": "C.UTF-8",
        "TASK": task_id,
        "BASE_MODEL": ws.model_name,
        "MODEL_PATH": str(ws.model_dir),
        "DATA_PATH": str(ws.data),
        "OUTPUT_DIR": str(ws.output),
        "WORKSPACE": str(ws.root),
        "GRADING_SERVER_URL": grading_url,
        "METRICS_FILE": str(ws.metrics_file),
        "CUDA_VISIBLE_DEVICES": ",".join(gpus),
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",      # indices are NVML's (executors/gpus.py PCI_BUS_ORDER)
        "RUN_DEADLINE": str(deadline),
        "RUN_SEED": str(seed),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONUNBUFFERED": "1",
    }
    env.update(passthrough)
    return env
