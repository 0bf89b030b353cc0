"""`autorl-tui score TASK --annotations FILE`: alpaca-eval's win rate and length-controlled win
rate of cached judgments (alpaca-eval's own `annotations.json`: a JSON list of records with
`instruction`, `output_1` (the reference), `output_2` (the model), `generator_1`, `generator_2`
and `preference`), computed by alpaca-eval itself with the GLM file of the task's official data.
No judge is asked."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from autorl_tui.exitcodes import ExitCode, UsageError

NEEDED = ("instruction", "output_1", "output_2", "generator_1", "generator_2", "preference")


def read_annotations(path: Path) -> list[dict]:
    if not path.is_file():
        raise UsageError(f"--annotations {path}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc})") from None
    try:
        rows = json.loads(text)
    except ValueError:
        try:      # JSON lines, one record a line
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError as exc:
            raise UsageError(f"{path}: neither a JSON list nor JSON lines ({exc}); give alpaca-eval's "
                             "annotations.json") from None
    if not isinstance(rows, list) or not rows:
        raise UsageError(f"{path}: expected a non-empty list of alpaca-eval annotation records")
    for i, row in enumerate(rows, 1):
        missing = [k for k in NEEDED if not isinstance(row, dict) or k not in row]
        if missing:
            raise UsageError(f"{path}: record {i} lacks {', '.join(missing)} (alpaca-eval's annotations have "
                             f"{', '.join(NEEDED)})")
    if len({r["generator_2"] for r in rows}) != 1:
        raise UsageError(f"{path}: the records compare several models (generator_2); give one model's annotations")
    return rows


def run_annotations(args, card, split_path: Path) -> int:
    from autorl_tui.grading.scorers.alpaca_eval import GAMED_FILE, glm_folder, lc_metrics

    if card.scorer != "alpaca_eval":
        raise UsageError(f"--annotations takes alpaca-eval's annotations; task {card.id} uses the {card.scorer} "
                         "scorer (use --completions)")
    rows = read_annotations(Path(args.annotations).expanduser())
    try:
        metrics = lc_metrics(rows, glm_folder(split_path), str(card.scorer_options.get("glm") or "length_controlled_v1"))
    except ValueError as exc:
        raise UsageError(f"cannot score the annotations: {exc}") from None
    out = {k: v for k, v in metrics.items() if isinstance(v, (int, float, str)) or v is None}
    lc, win = out.get("length_controlled_winrate"), out.get("win_rate")
    if args.json:
        print(json.dumps({"task": card.id, "protocol": card.protocol_name, "annotations": str(args.annotations),
                          "glm_file": str(glm_folder(split_path) / GAMED_FILE), "n": len(rows),
                          "win_rate": win, "lc_win_rate": lc, "metrics": out}))
        return int(ExitCode.OK)
    nan = lc is None or (isinstance(lc, float) and math.isnan(lc))
    print(f"{card.id} ({len(rows)} annotations of {rows[0]['generator_2']} vs {rows[0]['generator_1']}, alpaca-eval): "
          f"win rate {win:.2f}, length-controlled win rate " + ("undefined" if nan else f"{lc:.2f}"),
          file=sys.stdout)
    return int(ExitCode.OK)
