"""Cheap start (issue 36): an engine for a home with no Docker or Ray run builds no TLS context
(aiohttp serves plain HTTP on loopback here) and imports no executor module it does not use."""

import json
import os
import subprocess
import sys

import pytest

from tests.support.harness import REPO

pytestmark = pytest.mark.subprocess

START = """
import asyncio, json, sys
from pathlib import Path
from autorl_tui.engine.engine import Engine
from autorl_tui.home import Home

async def main():
    engine = Engine(Home(Path(sys.argv[1])))
    await engine.start()
    await engine.stop()
    import aiohttp.connector
    import ssl
    ctx = ssl.create_default_context()            # ssl itself works for everyone else
    print(json.dumps({"aiohttp_tls": aiohttp.connector._SSL_CONTEXT_VERIFIED is not None,
                      "ssl_ok": ctx.verify_mode == ssl.CERT_REQUIRED,
                      "asyncio_ssl": __import__("asyncio.sslproto").sslproto.ssl is not None,
                      "executors": sorted(m for m in sys.modules if m.startswith("autorl_tui.executors."))}))

asyncio.run(main())
"""


def test_an_engine_start_builds_no_tls_context_and_imports_no_unused_executor(tmp_path):
    proc = subprocess.run([sys.executable, "-c", START, str(tmp_path / "home")], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["aiohttp_tls"] is False and seen["ssl_ok"] and seen["asyncio_ssl"], seen
    assert not [m for m in seen["executors"] if m.endswith((".docker", ".ray"))], seen["executors"]
