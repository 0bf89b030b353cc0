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


@pytest.mark.subprocess
def test_importing_the_web_server_never_breaks_another_threads_import_of_ssl():
    """Hiding `ssl` from aiohttp's import is safe only with no other thread: one importing `ssl`
    meanwhile must never get an ImportError (it got ~700,000 in 0.2 s before the guard)."""
    code = ("import threading, ssl, time\n"
            "errors, stop = [], []\n"
            "def spin():\n"
            "    while not stop:\n"
            "        try:\n"
            "            import ssl as again\n"
            "        except ImportError as exc:\n"
            "            errors.append(exc)\n"
            "t = threading.Thread(target=spin); t.start()\n"
            "from autorl_tui.engine.loopback_web import web\n"
            "stop.append(1); t.join(); print(len(errors))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"
