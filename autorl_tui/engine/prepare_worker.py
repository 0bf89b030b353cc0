"""Preparation in a subprocess (it can be CPU-heavy: building the tiny model, generating a task's
games): `python -m autorl_tui.engine.prepare_worker REQUEST_JSON` prints progress lines
{"progress": {"step": ..., "done": n|null, "total": n|null}} while it works, then one result line:
{"ok": true, "model_path": ..., "splits": {split: path}} or {"ok": false, "error": ..., "kind": ...}."""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path


def main(request_json: str) -> int:
    req = json.loads(request_json)
    try:
        from autorl_tui import progress
        from autorl_tui.catalog.models import resolve_model
        from autorl_tui.catalog.tasks import load_task_card, materialize
        from autorl_tui.exitcodes import UsageError

        progress.set_sink(lambda p: print(json.dumps({"progress": p}), flush=True))
        try:
            card = load_task_card(Path(req["task_dir"]), req.get("protocol"),
                                  data_home=Path(req["data_home"]) if req.get("data_home") else None)
            progress.report(f"model {req['model']}: locating (built-in models are built on first use)")
            model_path = resolve_model(req["model"], Path(req["models_root"]), build=True)
            splits = {}
            for i, s in enumerate(req["splits"]):
                progress.report(f"task {card.id}: materializing split {s}", i, len(req["splits"]))
                splits[s] = str(materialize(card, s, Path(req["cache_root"])))
            progress.report(f"task {card.id}: data ready", len(req["splits"]), len(req["splits"]))
        except UsageError as exc:
            print(json.dumps({"ok": False, "error": str(exc), "kind": "task"}))
            return 0
        print(json.dumps({"ok": True, "model_path": str(model_path), "splits": splits}))
    except Exception as exc:  # reported to the engine as an infrastructure failure, with its traceback
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}", "kind": "infra",
                          "traceback": traceback.format_exc()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
