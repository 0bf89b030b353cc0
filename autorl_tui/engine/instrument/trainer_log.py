"""The log dicts transformers prints on stdout (ProgressCallback via tqdm.write, PrinterCallback
with `disable_tqdm=True`; TRL's trainers inherit both), parsed live from the agent's log stream.

transformers 5 prints `{'loss': '2.345', 'grad_norm': '1.2', 'learning_rate': '4.5e-05', 'epoch': '0.1'}`
(floats formatted to 4 significant digits, as strings); older versions print the numbers. A line
counts only if it is a whole Python dict literal with string keys, numeric (or numeric-string)
values, an `epoch` key and a key a transformers trainer logs: anything else (a user's own dict,
JSON events of a stream-JSON agent, a dict inside a sentence) is not a metric line.

Sessions on stdout: a summary dict (`train_runtime`) ends one; a log dict whose epoch is lower than
the previous dict's starts a new one (a new trainer counts epochs from 0 again).
"""

from __future__ import annotations

import ast
import math

MAX_LINE = 8192
TRAINER_KEYS = {"loss", "grad_norm", "learning_rate", "train_runtime", "train_loss", "reward", "kl", "entropy"}
SUMMARY_KEY = "train_runtime"


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


def parse_log_dict(line: str) -> dict[str, float | None] | None:
    """The metrics of a transformers log-dict line, or None when the line is not one."""
    text = line.strip()
    if not (text.startswith("{'") and text.endswith("}")) or len(text) > MAX_LINE or "'epoch'" not in text:
        return None
    try:
        obj = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
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
