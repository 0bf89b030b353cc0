"""Provenance of every submission, recorded with it: once the desk has stored a submission's
snapshot, `check_in_background` compares its weights with the base model's in a subprocess
(`python -m autorl_tui.grading.provenance`: streamed over safetensors, no GPU) and records a
`provenance` finding for the submission — `info` when it is derived from the base, `critical` when
it is not (another checkpoint, a re-initialised model, another architecture), `warning` when part
of it was replaced. The desk waits for it like a grading (`wait_gradings`), so finalization sees it."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from autorl_tui.engine.trust_events import report_finding

TIMEOUT_S = 1800
SEVERITY = {"derived": "info", "partly_replaced": "warning", "not_derived": "critical"}


def check_in_background(desk: Any, sub_id: int, seq: int, snapshot: Path) -> None:
    """Start the check; the desk's in-flight set holds it until it is recorded. `desk` is the run's
    SubmissionDesk (journal, home, run_id, workspace, _inflight; not imported: it imports us)."""
    task = asyncio.create_task(check_provenance(desk, sub_id, seq, snapshot))
    desk._inflight.add(task)
    task.add_done_callback(desk._inflight.discard)


async def run_provenance(base: Path, snapshot: Path, out: Path, timeout_s: float = TIMEOUT_S) -> dict:
    """The worker's record (`ok` false with an `error` when it could not compare)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "autorl_tui.grading.provenance", str(base), str(snapshot), str(out),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        env=dict(os.environ, OMP_NUM_THREADS="1", GOMP_SPINCOUNT="1000", CUDA_VISIBLE_DEVICES=""))
    try:
        _, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except (asyncio.TimeoutError, asyncio.CancelledError):
        proc.kill()
        await proc.wait()
        raise
    if not out.exists():
        return {"ok": False, "error": f"the provenance worker exited {proc.returncode}: "
                                      f"{err.decode(errors='replace')[-300:]}"}
    return json.loads(out.read_text())


async def check_provenance(desk: Any, sub_id: int, seq: int, snapshot: Path) -> None:
    journal = desk.journal
    out = desk.home.run_dir(desk.run_id) / "trust" / f"provenance-{seq:03d}.json"
    t0 = time.monotonic()
    try:
        rec = await run_provenance(desk.workspace.model_dir, snapshot, out)
    except asyncio.TimeoutError:
        rec = {"ok": False, "error": f"the comparison took longer than {TIMEOUT_S} s"}
    rec["wall_s"] = round(time.monotonic() - t0, 3)
    if not rec.get("ok"):
        report_finding(journal, "provenance", "warning",
                       f"submission {seq}: provenance not established: {rec.get('error')}", rec,
                       submission_id=sub_id)
        return
    verdict = rec["verdict"]
    words = {"derived": "derived from the base model", "partly_replaced": "partly replaced",
             "not_derived": "NOT derived from the base model"}[verdict]
    report_finding(journal, "provenance", SEVERITY[verdict], f"submission {seq}: {words}: {rec['summary']}", rec,
                   submission_id=sub_id)
