"""Naming runs on the command line: ids, short forms and unique prefixes resolved against a home's store."""

from __future__ import annotations


def resolve_runs(home, names: list[str]) -> list:
    """The runs `names` name, as store records, in order, each once; UsageError for a home without a
    store, an unknown or an ambiguous name."""
    from autorl_tui.exitcodes import UsageError
    from autorl_tui.run_ids import resolve_run_id
    from autorl_tui.store.db import StoreError
    from autorl_tui.store.queries import StoreReader

    try:
        reader = StoreReader.open(home.store_path)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    with reader:
        ids = dict.fromkeys(resolve_run_id(reader, name, str(home.root)) for name in names)
        return [reader.run(rid) for rid in ids]
