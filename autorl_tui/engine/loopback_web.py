"""aiohttp's web server, imported without the TLS client contexts aiohttp builds as it is imported.

aiohttp's client module creates two `ssl.SSLContext`s at import time, loading the system's CA
certificates (0.1 s each here, more under load), whatever the program uses aiohttp for. The engine
uses it only to serve plain HTTP to agents (loopback, a container network or a Unix socket) and
makes no HTTPS request with it, so aiohttp is imported here as on a Python built without `ssl`:
its modules see no `ssl` and build no context. `ssl` itself stays importable for everything else
(asyncio is imported first, so its TLS support is untouched); an aiohttp client in this process
could not make an HTTPS request at all (it fails, never connects unverified)."""

from __future__ import annotations

import asyncio  # noqa: F401  - before the window below: asyncio keeps its own `ssl`
import sys
import threading

_MISSING = object()

if "aiohttp" in sys.modules or threading.active_count() > 1:
    # imported already, or other threads run: as it is (while `ssl` is hidden below, another
    # thread's `import ssl` would fail: sys.modules is one for the process, no lock guards it)
    from aiohttp import web
else:
    _saved = sys.modules.get("ssl", _MISSING)
    sys.modules["ssl"] = None  # type: ignore[assignment]  # what `import ssl` raises ImportError on
    try:
        from aiohttp import web
    finally:
        if _saved is _MISSING:
            del sys.modules["ssl"]
        else:
            sys.modules["ssl"] = _saved  # type: ignore[assignment]

__all__ = ["web"]
