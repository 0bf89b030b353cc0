"""`autorl-tui demo`: the CPU demo: run the demo plan headless, print the summary and where the
JSON exports are."""

from __future__ import annotations

import asyncio
from pathlib import Path

from autorl_tui.exitcodes import ExitCode

DEFAULT_PLAN = Path(__file__).resolve().parents[2] / "data" / "plans" / "demo.yaml"


def register(subparsers) -> None:
    p = subparsers.add_parser("demo", help="run the CPU demo plan and print a summary")
    p.add_argument("--plan", default=str(DEFAULT_PLAN), help="plan YAML (default: data/plans/demo.yaml)")
    p.add_argument("--seed", type=int, action="append", help="override the plan's seeds (repeatable)")
    p.set_defaults(func=run)


def run(args) -> int:
    from autorl_tui.catalog.plans import load_plan

    plan = load_plan(args.plan)
    if args.seed:
        base = plan.runs[0]
        from dataclasses import replace

        plan.runs = [replace(r, seed=s) for r in {(x.task, x.agent, x.model): x for x in plan.runs}.values()
                     for s in args.seed]
        del base
    return asyncio.run(_demo(args, plan))


async def _demo(args, plan) -> int:
    from autorl_tui.commands._batch import engine_from_args
    from autorl_tui.commands._conditions import describe_conditions, run_conditions
    from autorl_tui.commands._display import make_display, print_next, print_summary
    from autorl_tui.daemon.server import serving
    from autorl_tui.store.export import write_json_atomic
    from autorl_tui.store.queries import StoreReader
    import sys
    import time

    engine = engine_from_args(args, role="demo")
    await engine.start()
    t0 = time.time()
    exports = {}
    try:
        async with serving(engine):            # `autorl-tui --home HOME` attaches to watch it
            run_ids = await engine.enqueue_plan(plan)
            display = make_display(engine, plain=getattr(args, "plain", False) or not sys.stdout.isatty())
            display.start(run_ids, plan.name)
            rows = await engine.wait_runs(run_ids)
            display.stop()
        engine.store.flush()
        reader = StoreReader.over(engine.store)
        print_summary(reader, run_ids)
        print(f"\nplan {plan.name}: {len(rows)} run(s) in {time.time() - t0:.0f}s; store: {engine.home.store_path}")
        print("\nconditions:")
        for r in rows:
            for line in describe_conditions(r["id"], run_conditions(reader, r["id"])):
                print(f"  {line}")
        for r in rows:
            path = engine.home.exports / f"{r['id']}.json"
            write_json_atomic(path, reader.export_run(r["id"]))
            exports[r["id"]] = str(path)
    finally:
        await engine.stop()
    print_next(engine.home.root, rows, plan.name, exports=exports)
    return int(ExitCode.OK if all(r["state"] == "done" for r in rows) else ExitCode.RUN_FAILED)
