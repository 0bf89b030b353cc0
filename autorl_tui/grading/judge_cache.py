"""On-disk cache of judge verdicts, keyed by what the judge saw: (judge model, prompt template
version, instruction, response shown as A, response shown as B). A hit sends no request.

SQLite (stdlib), one file shared by evaluations; written only by the scorer's own thread.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path


def judgment_key(model: str, template_version: str, prompt: str, output_a: str, output_b: str) -> str:
    payload = json.dumps([model, template_version, prompt, output_a, output_b], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


class JudgeCache:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(self.path), timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS judgments (key TEXT PRIMARY KEY, model TEXT, verdict TEXT, "
                        "reply TEXT, prompt_tokens INTEGER, completion_tokens INTEGER, created REAL)")
        self.db.commit()

    def get(self, key: str) -> dict | None:
        row = self.db.execute("SELECT verdict, reply, prompt_tokens, completion_tokens FROM judgments WHERE key=?",
                              (key,)).fetchone()
        if row is None:
            return None
        return {"verdict": row[0], "reply": row[1], "prompt_tokens": row[2], "completion_tokens": row[3]}

    def put(self, key: str, model: str, verdict: str, reply: str, prompt_tokens: int, completion_tokens: int) -> None:
        self.db.execute("INSERT OR REPLACE INTO judgments VALUES (?,?,?,?,?,?,?)",
                        (key, model, verdict, reply, prompt_tokens, completion_tokens, time.time()))
        self.db.commit()

    def close(self) -> None:
        self.db.close()
