"""The SQLite store: schema, migrations and the single writer. Imports nothing of the engine."""

from autorl_tui.store.db import Store, open_readonly

__all__ = ["Store", "open_readonly"]
