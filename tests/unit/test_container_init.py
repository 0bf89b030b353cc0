"""The container entry program, run on the host (outside a container its deadline guard kills
only the agent's process group): exit codes, deadline, deadline extension, socket forwarder."""

import asyncio
import socket
import sys
import time
from pathlib import Path

import pytest
from aiohttp import web

INIT = Path(__file__).resolve().parents[2] / "autorl_tui" / "isolation" / "container_init.py"


async def run_init(*args, timeout=30):
    proc = await asyncio.create_subprocess_exec(sys.executable, str(INIT), *args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.subprocess
async def test_exit_code_is_passed_through():
    code, _, _ = await run_init("--deadline", str(time.time() + 30), "--", "sh", "-c", "exit 3")
    assert code == 3


@pytest.mark.subprocess
async def test_deadline_kills_and_file_extends_it(tmp_path):
    t0 = time.time()
    code, _, err = await run_init("--deadline", str(t0 + 1), "--", "sleep", "60")
    assert code == 137 and "deadline reached" in err and time.time() - t0 < 5
    extended = tmp_path / "deadline"
    extended.write_text(str(time.time() + 2.5))
    t0 = time.time()
    code, _, _ = await run_init("--deadline", str(t0 + 0.5), "--deadline-file", str(extended), "--", "sleep", "60")
    assert code == 137 and 2.0 < time.time() - t0 < 6


@pytest.mark.subprocess
async def test_forwarder_carries_http_to_the_unix_socket(tmp_path):
    async def echo(request):
        body = await request.read()
        return web.Response(body=body[::-1])

    app = web.Application(client_max_size=8 << 20)
    app.router.add_post("/tok/echo", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    sock = tmp_path / "api.sock"
    await web.UnixSite(runner, str(sock)).start()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = (f"import urllib.request as u\n"
              f"data = bytes(range(256)) * 4096\n"
              f"for _ in range(3):\n"
              f"    r = u.urlopen(u.Request('http://127.0.0.1:{port}/tok/echo', data=data), timeout=10).read()\n"
              f"    assert r == data[::-1], len(r)\n"
              f"print('ok', len(r))\n")
    try:
        code, out, err = await run_init("--deadline", str(time.time() + 30), "--listen", f"127.0.0.1:{port}",
                                        "--socket", str(sock), "--", sys.executable, "-c", client)
    finally:
        await runner.cleanup()
    assert code == 0, err
    assert out.strip() == f"ok {256 * 4096}"
