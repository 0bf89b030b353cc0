"""A local HTTP server with the file layout of the hubs official data is published on, so that
`autorl-tui data get` runs offline against it (HF_ENDPOINT and AUTORL_GITHUB_ENDPOINT point here):

    /datasets/<repo>/resolve/<revision>/<file>     (huggingface, dataset repos)
    /<repo>/<revision>/<file>                      (raw.githubusercontent.com)
"""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class HubServer:
    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.requests: list[str] = []
        self._server: ThreadingHTTPServer | None = None

    def publish(self, hub: str, repo: str, revision: str, file: str, content: bytes, path: str) -> dict:
        """Serve `content` as a hub would; returns the card's `data.official` entry for it."""
        url = (f"/datasets/{repo}/resolve/{revision}/{file}" if hub == "huggingface"
               else f"/{repo}/{revision}/{file}")
        self.files[url] = content
        return {"path": path, "hub": hub, "repo": repo, "revision": revision, "file": file,
                "sha256": hashlib.sha256(content).hexdigest()}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def env(self) -> dict:
        return {"HF_ENDPOINT": self.url, "AUTORL_GITHUB_ENDPOINT": self.url}

    def __enter__(self) -> "HubServer":
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                hub.requests.append(self.path)
                body = hub.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
