"""Data provider for the `alpacaeval` card (AlpacaEval 2.0 as AutoRL-Bench runs it).

Reads the official files `autorl-tui data get alpacaeval` placed in `<home>/data/alpacaeval/`
(or a folder named by $ALPACAEVAL_PATH holding the same files):

    alpaca_eval_gpt4_baseline.json   the 805 instructions with gpt4_turbo's reference outputs
    df_gamed.csv                     alpaca-eval's gamed-baseline annotations (its LC GLM reads them)
    alpaca_train.parquet             tatsu-lab/alpaca (52k rows; or alpaca_train.jsonl, the same rows)

Splits: `test` is the whole evaluation set in its official order (alpaca-eval's GLM reads an
annotation's row number as the instruction's index, so the order is part of the protocol);
`train` is the first `train_rows` (2,000) Alpaca rows in AutoRL-Bench's own shape
({instruction, input, output, question, answer}); `dev`, the harness's feedback split that
AutoRL-Bench does not have, is the last `dev_rows` of those training rows judged against
Alpaca's own outputs. A judged split (dev, test) is a folder: `items.jsonl` and a copy of the GLM's
file, so that the grader, which receives the split's folder, hands it to alpaca-eval.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from autorl_tui.catalog.tasks import DataUnavailable, _write_jsonl, files_fingerprint

ENV = "ALPACAEVAL_PATH"
EVAL_FILE = "alpaca_eval_gpt4_baseline.json"
GAMED_FILE = "df_gamed.csv"
TRAIN_FILES = ("alpaca_train.parquet", "alpaca_train.jsonl")


def data_root(card) -> Path | None:
    if os.environ.get(ENV):
        return Path(os.environ[ENV]).expanduser()
    if card.data_home is not None:
        return Path(card.data_home) / card.id
    return None


def _missing(card) -> str | None:
    root = data_root(card)
    wanted = [EVAL_FILE, GAMED_FILE]
    if root is None or not root.is_dir():
        return (f"task {card.id} needs the official AlpacaEval 2.0 files and none were found: run `autorl-tui data get "
                f"{card.id}` (fetches and verifies them), or set {ENV}=/path/to/folder holding {', '.join(wanted)} "
                f"and {TRAIN_FILES[0]}")
    absent = [name for name in wanted if not (root / name).is_file()]
    if not any((root / name).is_file() for name in TRAIN_FILES):
        absent.append(" or ".join(TRAIN_FILES))
    if absent:
        return (f"task {card.id}: {root} lacks {', '.join(absent)}; run `autorl-tui data get {card.id}` or put "
                f"them there ({ENV} names another folder)")
    return None


def available(card) -> str | None:
    return _missing(card)


def source_fingerprint(card) -> str:
    root = data_root(card)
    if root is None or not root.is_dir():
        return "missing"
    return files_fingerprint(root, (EVAL_FILE, GAMED_FILE, *TRAIN_FILES))


def _alpaca_rows(root: Path, n: int) -> list[dict]:
    parquet, jsonl = (root / name for name in TRAIN_FILES)
    if parquet.is_file():
        import pyarrow.parquet as pq
        rows = pq.read_table(parquet).slice(0, n).to_pylist()
    else:
        rows = []
        with open(jsonl) as fh:
            for line in fh:
                if line.strip():
                    rows.append(json.loads(line))
                if len(rows) == n:
                    break
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or "instruction" not in row or "output" not in row:
            raise DataUnavailable(f"alpacaeval: Alpaca row {i + 1} lacks instruction/output (is this tatsu-lab/alpaca?)")
    return rows


def _question(row: dict) -> str:
    """AutoRL-Bench's question: the instruction, then its input after a blank line when there is one."""
    extra = row.get("input") or ""
    return row["instruction"] if not extra else f"{row['instruction']}\n\n{extra}"


def _eval_rows(root: Path) -> list[dict]:
    try:
        rows = json.loads((root / EVAL_FILE).read_text())
    except ValueError as exc:
        raise DataUnavailable(f"alpacaeval: {root / EVAL_FILE} is not JSON ({exc})") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "instruction" in r and "output" in r
                                             for r in rows):
        raise DataUnavailable(f"alpacaeval: {root / EVAL_FILE} must be a list of {{instruction, output, generator}} "
                              "objects (alpaca-eval's reference outputs)")
    return rows


def _place_gamed(root: Path, out_dir: Path) -> None:
    target = out_dir / GAMED_FILE
    tmp = out_dir / f".{GAMED_FILE}.{os.getpid()}"
    shutil.copyfile(root / GAMED_FILE, tmp)
    os.replace(tmp, target)


def materialize(card, split: str, out_dir: Path) -> Path:
    problem = _missing(card)
    if problem:
        raise DataUnavailable(problem)
    root = data_root(card)
    params = dict(card.data.get("params") or {})
    n_train, n_dev = int(params.get("train_rows", 2000)), int(params.get("dev_rows", 64))
    out_dir = Path(out_dir)
    if split == "train":
        items = [{"instruction": r["instruction"], "input": r.get("input") or "", "output": r["output"],
                  "question": _question(r), "answer": r["output"]} for r in _alpaca_rows(root, n_train)]
        return _write_jsonl(out_dir / "train.jsonl", items)
    if split == "dev":
        rows = _alpaca_rows(root, n_train)
        start = max(0, len(rows) - n_dev)
        items = [{"id": f"alpaca-train-{start + i:05d}", "prompt": _question(r), "reference": r["output"],
                  "reference_generator": "alpaca_text_davinci_003", "dataset": "alpaca"}
                 for i, r in enumerate(rows[start:])]
    elif split == "test":
        items = [{"id": f"alpacaeval-{i:03d}", "prompt": r["instruction"], "reference": r["output"],
                  "reference_generator": r.get("generator", "gpt4_turbo"), "dataset": r.get("dataset", "")}
                 for i, r in enumerate(_eval_rows(root))]
    else:
        raise DataUnavailable(f"task {card.id}: no split {split!r} (train, dev, test)")
    # A judged split is a folder (the grader receives it whole): its items and the GLM's file.
    folder = out_dir / split
    folder.mkdir(parents=True, exist_ok=True)
    _place_gamed(root, folder)
    _write_jsonl(folder / "items.jsonl", items)
    return folder
