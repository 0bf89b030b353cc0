"""Who a sandboxed process is, by its environment: the leased sandbox uids have no passwd entry
on the host, so a library that asks `getpwuid()` (getpass.getuser(), a `~` with no HOME: torch
inductor's and triton's cache folders) would fail there. Every sandboxed child gets HOME (a folder
it owns and may write), USER and LOGNAME, so nothing needs that lookup."""

from __future__ import annotations

SANDBOX_USER = "sandbox"


def identity_env(home: str) -> dict[str, str]:
    """HOME, USER and LOGNAME for a sandboxed process whose own folder is `home`."""
    return {"HOME": str(home), "USER": SANDBOX_USER, "LOGNAME": SANDBOX_USER}
