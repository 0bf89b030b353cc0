"""The per-run grading API: aiohttp on 127.0.0.1 (and optionally a Unix socket for containers
without a network). Every path starts with an unguessable per-run token, so a run can reach only
its own server. The API is a thin shell over the run supervisor's `SubmissionDesk`."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Protocol

from aiohttp import web

from autorl_tui.engine.submissions import SubmissionRejected


class ApiError(Exception):
    def __init__(self, status: int, message: str, code: str = "error", extra: dict | None = None):
        super().__init__(message)
        self.status, self.code, self.extra = status, code, extra or {}


class SubmissionDesk(Protocol):
    async def submit(self, model_path: str) -> dict: ...
    def time_info(self) -> dict: ...
    def submissions_info(self) -> list[dict]: ...
    def health_info(self) -> dict: ...


def _error(status: int, message: str, code: str, extra: dict | None = None) -> web.Response:
    return web.json_response({"error": message, "code": code, **(extra or {})}, status=status)


class GradingServer:
    def __init__(self, desk: SubmissionDesk, token: str | None = None, host: str = "127.0.0.1",
                 unix_socket: Path | None = None):
        self.desk = desk
        self.token = token or secrets.token_urlsafe(24)
        self.host = host
        self.unix_socket = unix_socket
        self.port: int | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/{self.token}"

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024)
        t = self.token
        app.router.add_post(f"/{t}/submit", self._submit)
        app.router.add_get(f"/{t}/health", self._health)
        app.router.add_get(f"/{t}/time", self._time)
        app.router.add_get(f"/{t}/submissions", self._submissions)
        return app

    async def start(self, port: int = 0) -> None:
        self._runner = web.AppRunner(self._app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        if self.unix_socket is not None:
            self.unix_socket.unlink(missing_ok=True)
            await web.UnixSite(self._runner, str(self.unix_socket)).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _submit(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            return _error(400, 'the body must be JSON like {"model_path": "output/v1"}', "bad_json")
        if not isinstance(body, dict):
            return _error(400, 'the body must be a JSON object like {"model_path": "output/v1"}', "bad_json")
        try:
            result = await self.desk.submit(body.get("model_path"))
        except SubmissionRejected as exc:
            return _error(400, str(exc), exc.code)
        except ApiError as exc:
            return _error(exc.status, str(exc), exc.code, exc.extra)
        return web.json_response(result)

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response(self.desk.health_info())

    async def _time(self, request: web.Request) -> web.Response:
        return web.json_response(self.desk.time_info())

    async def _submissions(self, request: web.Request) -> web.Response:
        return web.json_response({"submissions": self.desk.submissions_info()}, dumps=lambda o: json.dumps(o))
