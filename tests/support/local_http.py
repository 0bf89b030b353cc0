"""Local HTTP servers for tests: `serve(handler) -> base URL` on a free loopback port, and the
`http_server` fixture that starts them and shuts every one down after the test."""

import threading
from http.server import ThreadingHTTPServer

import pytest


def serve(handler, started: list) -> str:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    started.append(srv)
    return f"http://127.0.0.1:{srv.server_address[1]}"


@pytest.fixture()
def http_server():
    started: list = []
    yield lambda handler: serve(handler, started)
    for srv in started:
        srv.shutdown()
        srv.server_close()
