"""The end-of-run trust sweep, on the harness side, when the run enters `finalizing`:

- **contamination**: the held-out split against everything the agent wrote or trained on — the
  files of every code revision (from the store), the data files of every submitted snapshot and
  the workspace as it was left (models/ and data/, the harness's own, excepted) — with
  engine/contamination.py; one finding listing the matched items (`critical` over the tolerance,
  `warning` at or under it, none when nothing matched);
- **attempts on protected things**: submissions refused because they reached outside output/
  (`outside_output`, `symlink_out`) and actions in the agent's log that name a protected path
  (the store, snapshots, caches holding held-out splits, the grader's code, a held-out split file).

Never fails the run: a sweep that breaks records a `warning` finding saying so."""

from __future__ import annotations

import asyncio
import json
import os
import re
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from autorl_tui.engine import contamination
from autorl_tui.engine.trust_events import report_finding

if TYPE_CHECKING:
    from autorl_tui.engine.run_journal import RunJournal

MAX_FILE_BYTES = 32 << 20
MAX_TOTAL_BYTES = 256 << 20
NOT_DATA = re.compile(r"(\.safetensors|\.bin|\.pt|\.pth|\.ckpt|\.gguf|\.npy|\.npz|\.pyc|\.so|\.png|\.jpg)$|"
                      r"(^|/)(tokenizer\.json|tokenizer_config\.json|vocab\.json|merges\.txt|config\.json|"
                      r"generation_config\.json|special_tokens_map\.json|chat_template\.jinja)$")
HARNESS_OWNED = ("models", "data")
OUTSIDE_CODES = ("outside_output", "symlink_out")


def _text(data: bytes | None) -> str | None:
    if data is None or b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


class _Sources:
    """Source texts by name, deduplicated by content, within the byte caps."""

    def __init__(self):
        self.texts: dict[str, str] = {}
        self.seen: set[int] = set()
        self.total = 0
        self.skipped: list[str] = []

    def add(self, name: str, data: bytes | None) -> None:
        text = _text(data)
        if text is None:
            return
        key = hash(text)
        if key in self.seen:
            return
        if self.total + len(data) > MAX_TOTAL_BYTES:
            self.skipped.append(name)
            return
        self.seen.add(key)
        self.total += len(data)
        self.texts[name] = text

    def add_tree(self, label: str, root: Path, skip_top: tuple[str, ...] = ()) -> None:
        if not root.is_dir():
            return
        for dirpath, dirnames, filenames in os.walk(root):
            rel_dir = Path(dirpath).relative_to(root)
            if rel_dir == Path("."):
                dirnames[:] = [d for d in dirnames if d not in skip_top]
            for name in sorted(filenames):
                path = Path(dirpath) / name
                rel = str(rel_dir / name) if rel_dir != Path(".") else name
                if NOT_DATA.search(rel) or path.is_symlink():
                    continue
                try:
                    if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
                        continue
                    self.add(f"{label}{rel}", path.read_bytes())
                except OSError:
                    continue


def collect_sources(store, run_id: str, workspace_root: Path | None) -> _Sources:
    src = _Sources()
    for seq, path, digest in store.revision_files(run_id):
        if not NOT_DATA.search(path):
            src.add(f"code/{path} (revision {seq})", store.get_blob(digest))
    for sub in store.submissions(run_id):
        if sub.snapshot_path:
            src.add_tree(f"submission {sub.seq}: ", Path(sub.snapshot_path))
    if workspace_root is not None:
        src.add_tree("workspace: ", Path(workspace_root), skip_top=HARNESS_OWNED)
    return src


def read_items(path: str | None) -> list[dict] | None:
    if not path or not str(path).endswith(".jsonl") or not Path(path).is_file():
        return None
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def contamination_evidence(store, run_id: str, split_paths: dict, workspace_root: Path | None,
                           protocol: contamination.ContaminationProtocol) -> dict | None:
    """The check's result (None when the task has no held-out .jsonl split). Reads only."""
    held_out = read_items(split_paths.get("test"))
    if not held_out:
        return None
    src = collect_sources(store, run_id, workspace_root)
    result = contamination.check(held_out, src.texts, read_items(split_paths.get("train")), protocol)
    result["skipped_over_cap"] = src.skipped[:20]
    return result


def report_contamination(journal: "RunJournal", result: dict | None) -> None:
    if not result or not result["n_matched"]:
        return
    n, tolerance = result["n_matched"], result["protocol"]["tolerance"]
    severity = "critical" if result["flagged"] else "warning"
    ids = ", ".join(str(m["id"]) for m in result["matched"][:5]) + (" ..." if n > 5 else "")
    report_finding(journal, "contamination", severity,
                   f"{n} held-out item(s) found in what the agent wrote or trained on (tolerance "
                   f"{tolerance}): {ids}", result)


def protected_path_findings(journal: "RunJournal", protected: list[str]) -> None:
    store, run_id = journal.store, journal.run_id
    for ev in store.events_of_kind(run_id, "submission"):
        data = ev.get("data") or {}
        if isinstance(data, dict) and data.get("code") in OUTSIDE_CODES:
            report_finding(journal, "protected_path", "warning",
                           f"a submission reached outside output/: {ev['message'][:300]}",
                           {"event_id": ev["id"], "code": data.get("code")}, ts=ev["ts"])
    needles = [p for p in protected if p]
    for ev in store.events_of_kind(run_id, "action"):
        text = ev["message"] + " " + json.dumps(ev.get("data") or {}, default=str)
        hit = next((p for p in needles if p in text), None)
        if hit is not None:
            report_finding(journal, "protected_path", "critical",
                           f"an agent action named a protected path ({hit}): {ev['message'][:200]}",
                           {"event_id": ev["id"], "path": hit}, ts=ev["ts"])


def protected_names(private_paths: list[Path], split_paths: dict) -> list[str]:
    names = [str(p) for p in private_paths]
    names += [str(split_paths[s]) for s in ("test", "private") if split_paths.get(s)]
    return names


async def sweep(journal: "RunJournal", split_paths: dict, workspace_root: Path | None, private_paths: list[Path],
                protocol: contamination.ContaminationProtocol | None = None) -> None:
    """Record the run's end-of-run findings (see the module docstring)."""
    protocol = protocol or contamination.ContaminationProtocol()
    try:
        protected_path_findings(journal, protected_names(private_paths, split_paths))
        report_contamination(journal, await asyncio.to_thread(contamination_evidence, journal.store, journal.run_id,
                                                              split_paths, workspace_root, protocol))
    except Exception as exc:  # noqa: BLE001 - evidence missing is recorded; the run's result stands
        report_finding(journal, "sweep", "warning", f"the trust sweep failed: {type(exc).__name__}: {exc}",
                       {"traceback": traceback.format_exc()})
