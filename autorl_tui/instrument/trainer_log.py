"""The log dicts transformers prints on stdout (ProgressCallback via tqdm.write, PrinterCallback
with `disable_tqdm=True`; TRL's trainers inherit both), parsed live from the agent's log stream.

transformers 5 prints `{'loss': '2.345', 'grad_norm': '1.2', 'learning_rate': '4.5e-05', 'epoch': '0.1'}`
(floats formatted to 4 significant digits, as strings); older versions print the numbers. A line
counts only if it ends with a Python dict literal with string keys, numeric (or numeric-string)
values, an `epoch` key and a key a transformers trainer logs: anything else (a user's own dict,
JSON events of a stream-JSON agent, a dict followed by more words) is not a metric line.

With stdout and stderr merged (`2>&1 | tee`, as AutoRL-Bench's agents run their trainers), tqdm's
`\r` progress fragments and ANSI cursor sequences share the line with the dict `tqdm.write` prints:
the dict is looked for after ANSI sequences are removed, in the last `\r` segment of the line,
after whatever came before it there.

Sessions on stdout: a summary dict (`train_runtime`) ends one; a log dict whose epoch is lower than
the previous dict's starts a new one (a new trainer counts epochs from 0 again).
"""

from __future__ import annotations

import ast
import math
import re

MAX_LINE = 8192
TRAINER_KEYS = {"loss", "grad_norm", "learning_rate", "train_runtime", "train_loss", "reward", "kl", "entropy"}
SUMMARY_KEY = "train_runtime"
# CSI (colours, cursor moves: tqdm's `ESC[A`), OSC (titles, links) and two-byte escapes
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
MAX_STARTS = 8          # dict starts tried on one line


def _number(v) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str) and len(v) <= 40:
        try:
            return float(v)      # '2.345', '4.5e-05', 'nan', 'inf'
        except ValueError:
            return None
    return None


def _dict_at_end(line: str):
    """The dict literal that ends the visible text of a line (after ANSI sequences are removed,
    in its last non-blank `\\r` segment), or None. Only that segment is bounded: the progress
    fragments before it may be long."""
    if "'epoch'" not in line:
        return None
    if "\x1b" in line:
        line = ANSI.sub("", line)
    text = ""
    for segment in reversed(line.split("\r")):
        if segment.strip():
            text = segment.strip()
            break
    if len(text) > MAX_LINE or not text.endswith("}") or "'epoch'" not in text:
        return None
    start, tried = text.find("{'"), 0
    while start >= 0 and tried < MAX_STARTS:
        tried += 1
        try:
            return ast.literal_eval(text[start:])
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            start = text.find("{'", start + 1)
    return None


def parse_log_dict(line: str) -> dict[str, float | None] | None:
    """The metrics of a transformers log-dict line, or None when the line is not one."""
    obj = _dict_at_end(line)
    if not isinstance(obj, dict) or "epoch" not in obj:
        return None
    out: dict[str, float | None] = {}
    for k, v in obj.items():
        if not isinstance(k, str):
            return None
        f = _number(v)
        if f is None:
            if isinstance(v, str):       # transformers truncates long strings; skip them
                continue
            return None
        out[k] = None if math.isnan(f) else f
    if not (TRAINER_KEYS & out.keys() or any(k.startswith("eval_") for k in out)):
        return None
    return out


class StdoutSessions:
    """Splits the log dicts of one agent's stdout into trainer sessions. `feed(values)` returns
    (starts_new_session, is_summary)."""

    def __init__(self, state: dict | None = None):
        state = state or {}
        self.last_epoch: float | None = state.get("last_epoch")
        self.closed: bool = bool(state.get("closed", True))

    def state(self) -> dict:
        return {"last_epoch": self.last_epoch, "closed": self.closed}

    def feed(self, values: dict) -> tuple[bool, bool]:
        epoch = values.get("epoch")
        new = self.closed or (epoch is not None and self.last_epoch is not None and epoch < self.last_epoch)
        summary = SUMMARY_KEY in values
        self.closed = summary
        if epoch is not None:
            self.last_epoch = epoch
        return new, summary
