"""Run ids as the user types them: the full id, the short form the console shows (`r0001`), or
any unique prefix. One rule for every command that takes a run id."""

from __future__ import annotations

from autorl_tui.exitcodes import UsageError


def match_run_id(given: str, candidates: list[str], where: str) -> str:
    """The one id in `candidates` (ids that start with `given`) that `given` names.

    Exact id first, then the short form `r0001` (the id up to its first '-', so `r1000` never
    means `r10000-...`), then a unique prefix. Ambiguous or unknown: a UsageError listing what to type."""
    if given in candidates:
        return given
    short = [c for c in candidates if c.startswith(given + "-")]
    if len(short) == 1:
        return short[0]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise UsageError(f"no run {given!r} in {where}; `autorl-tui runs list` shows the ids")
    listed = ", ".join(sorted(candidates)[:10]) + (f" and {len(candidates) - 10} more" if len(candidates) > 10 else "")
    raise UsageError(f"run id {given!r} is ambiguous in {where}: it starts {len(candidates)} ids ({listed}); "
                     f"type more of the id")


def resolve_run_id(reader, given: str, where: str) -> str:
    """`match_run_id` over the store (a `store.queries.StoreReader`)."""
    return match_run_id(given, reader.run_ids_starting(given), where)
