"""Reading AutoRL-Bench's files: a run folder (`workspace/<task>/<run_id>_<agent>/` with
run_meta.json, scores.json, agent.log, agent.jsonl, code/) and `results.csv`.

Everything is checked before anything is used: a malformed file raises Malformed naming the file
and the line, so the caller can skip the whole run (nothing half-imported)."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from autorl_tui.interop.autorl_bench_ledger import parse_iso

RESULTS_COLUMNS = ("run_id", "timestamp", "task", "agent", "driver_model", "base_model", "baseline", "best_score",
                   "improvement", "submissions", "duration_s", "success", "workspace")
FOLDER_NAME = re.compile(r"^(?P<run_id>\d{8}T\d{6}(?:_p\d+)?)_(?P<agent>.+)$")
MAX_TEXT_BYTES = 64 * 1024 * 1024     # agent.log / agent.jsonl beyond this are read up to it
MAX_CODE_FILE_BYTES = 1024 * 1024
MAX_CODE_FILES = 2000


class Malformed(ValueError):
    """A file that is not in AutoRL-Bench's format; the message names the file and line."""


@dataclass
class RunFolder:
    path: Path
    run_id: str
    agent: str
    task: str
    meta: dict
    scores: list[dict]
    base_model: str | None = None
    log_lines: list[str] = field(default_factory=list)
    jsonl_lines: list[str] = field(default_factory=list)
    code: dict[str, bytes] = field(default_factory=dict)
    code_skipped: list[str] = field(default_factory=list)


@dataclass
class ResultRow:
    line: int
    values: dict


def _json_file(path: Path):
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Malformed(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None


def _line_of(text: str, needle: str, start_line: int = 1) -> int:
    """The line of the first occurrence of needle (an entry's opening) from start_line."""
    lines = text.splitlines()
    for i in range(start_line - 1, len(lines)):
        if needle in lines[i]:
            return i + 1
    return start_line


def _number(value, what: str, where: str, *, required: bool = False) -> float | None:
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Malformed(f"{where}: `{what}` must be a number, got {json.dumps(value)[:60]}")
    return float(value)


def read_scores(path: Path) -> list[dict]:
    """scores.json: a JSON list of entries with submission_id, timestamp, model_path, score..."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8", errors="replace")
    data = _json_file(path)
    if not isinstance(data, list):
        raise Malformed(f"{path}: line 1: must be a JSON list of submissions, got {type(data).__name__}")
    line = 1
    for i, entry in enumerate(data):
        line = _line_of(text, "{", line + (1 if i else 0))
        where = f"{path}: line {line} (entry {i + 1})"
        if not isinstance(entry, dict):
            raise Malformed(f"{where}: an entry must be an object, got {json.dumps(entry)[:60]}")
        _number(entry.get("score", 0.0), "score", where)
        _number(entry.get("elapsed_seconds"), "elapsed_seconds", where)
        if parse_iso(entry.get("timestamp")) is None:
            raise Malformed(f"{where}: `timestamp` must be an ISO time like 2026-02-28T10:00:00, "
                            f"got {json.dumps(entry.get('timestamp'))[:60]}")
        if not isinstance(entry.get("model_path", ""), str):
            raise Malformed(f"{where}: `model_path` must be a string")
    return data


def read_meta(path: Path) -> dict:
    if not path.exists():
        raise Malformed(f"{path}: missing: an AutoRL-Bench run folder holds run_meta.json")
    meta = _json_file(path)
    if not isinstance(meta, dict):
        raise Malformed(f"{path}: line 1: must be a JSON object (start_time, timeout_s, ...)")
    for key in ("start_time", "timeout_s", "last_submit_time", "end_time"):
        _number(meta.get(key), key, f"{path}: line {_line_of(json.dumps(meta, indent=2), key)}",
                required=key in ("start_time", "timeout_s"))
    return meta


def _text_lines(path: Path) -> list[str]:
    if not path.is_file():
        return []
    with open(path, "rb") as fh:
        data = fh.read(MAX_TEXT_BYTES)
    return data.decode("utf-8", errors="replace").splitlines()


def _code(folder: Path) -> tuple[dict[str, bytes], list[str]]:
    files, skipped = {}, []
    if not folder.is_dir():
        return files, skipped
    for p in sorted(folder.rglob("*")):
        if p.is_symlink() or not p.is_file():
            continue
        rel = str(p.relative_to(folder))
        if len(files) >= MAX_CODE_FILES or p.stat().st_size > MAX_CODE_FILE_BYTES:
            skipped.append(rel)
            continue
        files[rel] = p.read_bytes()
    return files, skipped


def _base_model(folder: Path) -> str | None:
    models = folder / "models"
    if not models.is_dir():
        return None
    names = [p for p in models.iterdir()]
    if len(names) == 1 and names[0].is_dir() and not (names[0] / "config.json").exists():
        inner = list(names[0].iterdir())       # an org/name model id: models/Qwen/Qwen2.5-0.5B
        if len(inner) == 1:
            return f"{names[0].name}/{inner[0].name}"
    return names[0].name if len(names) == 1 else None


def is_run_folder(path: Path) -> bool:
    return path.is_dir() and (path / "run_meta.json").exists()


def read_run_folder(path: Path) -> RunFolder:
    path = Path(path).resolve()
    meta = read_meta(path / "run_meta.json")
    scores = read_scores(path / "scores.json")
    m = FOLDER_NAME.match(path.name)
    run_id, agent = (m["run_id"], m["agent"]) if m else (path.name, "unknown")
    code, skipped = _code(path / "code")
    return RunFolder(path=path, run_id=run_id, agent=agent, task=str(meta.get("task") or path.parent.name),
                     meta=meta, scores=scores, base_model=_base_model(path), log_lines=_text_lines(path / "agent.log"),
                     jsonl_lines=_text_lines(path / "agent.jsonl"), code=code, code_skipped=skipped)


def read_results(path: Path, problems: list[str]) -> list[ResultRow]:
    """results.csv rows; a malformed row is reported (with its line) in `problems` and left out."""
    rows = []
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            return []
        missing = [c for c in RESULTS_COLUMNS if c not in header]
        if missing:
            problems.append(f"{path}: line 1: header lacks {', '.join(missing)} (AutoRL-Bench's results.csv has "
                            f"{','.join(RESULTS_COLUMNS)}); file skipped")
            return []
        for values in reader:
            line = reader.line_num
            if not values:
                continue
            if len(values) != len(header):
                problems.append(f"{path}: line {line}: {len(values)} fields, the header has {len(header)}; row skipped")
                continue
            row = dict(zip(header, values))
            try:
                for key in ("baseline", "best_score", "improvement", "duration_s"):
                    if row[key] not in ("", "None"):
                        float(row[key])
                if row["submissions"] not in ("", "None"):
                    int(row["submissions"])
            except ValueError:
                problems.append(f"{path}: line {line}: {key} is not a number ({row[key]!r}); row skipped")
                continue
            if not row["run_id"] or not row["task"]:
                problems.append(f"{path}: line {line}: run_id and task are required; row skipped")
                continue
            rows.append(ResultRow(line=line, values=row))
    return rows


def number(text: str | None) -> float | None:
    return None if text in (None, "", "None") else float(text)
