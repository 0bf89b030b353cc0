"""Writing a run brought in from another harness's files (interop/autorl_bench_import.py builds
the rows): all of it in one transaction or nothing, and never over a run already there."""

from __future__ import annotations

import hashlib
import json
import zlib

from autorl_tui.store.db import Store


def write_imported_run(store: Store, run: dict, submissions: list[dict], events: list[tuple],
                       revision: dict | None) -> bool:
    """Writes the run row, its submissions (the best scored one becomes the run's best submission),
    its events `(ts, kind, level, message, data)` and its code as revision 1 (`revision`: files
    {relative path: bytes}, skipped, ts). False, and nothing written, when a run with its id exists."""
    if store.one("SELECT 1 AS x FROM runs WHERE id=?", (run["id"],)):
        return False
    statements = [_insert("runs", {**run, "spec": json.dumps(run["spec"])})]
    statements += [_insert("submissions", s) for s in submissions]
    best = max((s for s in submissions if s["status"] == "scored"), key=lambda s: s["score"], default=None)
    if best is not None:
        statements.append(("UPDATE runs SET best_submission_id=(SELECT id FROM submissions WHERE run_id=? AND seq=?) "
                           "WHERE id=?", (run["id"], best["seq"], run["id"])))
    statements += [("INSERT INTO events (run_id, attempt, ts, kind, level, message, data) VALUES (?, NULL, ?, ?, ?, ?, ?)",
                    (run["id"], *e)) for e in events]
    if revision is not None:
        manifest = {}
        for rel, content in revision["files"].items():
            digest = hashlib.sha256(content).hexdigest()
            manifest[rel] = digest
            statements.append(("INSERT OR IGNORE INTO blobs (sha256, size, encoding, content) VALUES (?, ?, 'zlib', ?)",
                               (digest, len(content), zlib.compress(content, 6))))
        statements.append(_insert("revisions", {"run_id": run["id"], "seq": 1, "ts": revision["ts"], "reason": "final",
                                                "manifest": json.dumps(manifest), "n_files": len(manifest),
                                                "total_bytes": sum(len(c) for c in revision["files"].values()),
                                                "skipped": json.dumps(revision["skipped"])}))
    store.write_atomically(statements)
    return True


def _insert(table: str, row: dict) -> tuple[str, tuple]:
    return (f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})", tuple(row.values()))
