"""The per-run API that agents call at $GRADING_SERVER_URL (submit a model, read the run's time,
list its submissions): aiohttp on 127.0.0.1, and optionally a Unix socket for containers without a
network. Not the grader: that is the `grading/` subprocess. Every path starts with an unguessable
per-run token, so a run can reach only its own server. The API is the HTTP edge of the run's
`SubmissionDesk` (engine/submission_desk.py): the desk raises typed domain errors, this module alone
turns them into HTTP statuses.

It answers every request with JSON, and bad input with a 4xx saying how to fix it: the limits
below bound what one client can make it read or hold (docs/grading.md, "Grading API")."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from autorl_tui.engine.loopback_web import web
from autorl_tui.engine.submission_desk import (GpuRequestRefused, GradingFailed, SubmissionLimit, SubmissionRefused,
                                               SubmissionsClosed)
from autorl_tui.grading_host.submissions import SubmissionRejected

if TYPE_CHECKING:
    from autorl_tui.engine.submission_desk import SubmissionDesk

HEADER_TIMEOUT_S = 10.0      # a connection must finish its request line and headers within this
BODY_TIMEOUT_S = 10.0        # ...and its body within this once the headers are in
MAX_BODY_BYTES = 64 * 1024
MAX_JSON_DEPTH = 8
MAX_HEADERS = 32

log = logging.getLogger(__name__)


class ApiError(Exception):
    """A request this API refuses before it reaches the desk (its body, its JSON)."""

    def __init__(self, status: int, message: str, code: str = "error", extra: dict | None = None):
        super().__init__(message)
        self.status, self.code, self.extra = status, code, extra or {}


# The desk's refusals, as HTTP statuses (a `SubmissionRejected` folder is a 400).
REFUSAL_STATUS: dict[type[SubmissionRefused], int] = {
    SubmissionsClosed: 409, SubmissionLimit: 429, GpuRequestRefused: 400, GradingFailed: 422}


def _error(status: int, message: str, code: str, extra: dict | None = None) -> web.Response:
    return web.json_response({"error": message, "code": code, **(extra or {})}, status=status)


class RunApiServer:
    def __init__(self, desk: "SubmissionDesk", token: str | None = None, host: str = "127.0.0.1",
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
        app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[_json_errors])
        t = self.token
        app.router.add_post(f"/{t}/submit", self._submit)
        app.router.add_get(f"/{t}/health", self._health)
        app.router.add_get(f"/{t}/time", self._time)
        app.router.add_get(f"/{t}/submissions", self._submissions)
        return app

    async def start(self, port: int = 0) -> None:
        # aiohttp closes a connection that has not completed a request by its keep-alive deadline
        # (counted from the connection's start or its previous response): that is the header timeout.
        self._runner = web.AppRunner(self._app(), access_log=None, handle_signals=False,
                                     keepalive_timeout=HEADER_TIMEOUT_S, max_headers=MAX_HEADERS)
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
        body = await _read_json(request)
        model_path = _model_path(body)
        try:
            result = await self.desk.submit(model_path, gpu=body.get("gpu"))
        except SubmissionRejected as exc:
            return _error(400, str(exc), exc.code)
        except SubmissionRefused as exc:
            return _error(REFUSAL_STATUS[type(exc)], str(exc), exc.code, exc.extra)
        return web.json_response(result)

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response(self.desk.health_info())

    async def _time(self, request: web.Request) -> web.Response:
        return web.json_response(self.desk.time_info())

    async def _submissions(self, request: web.Request) -> web.Response:
        return web.json_response({"submissions": self.desk.submissions_info()}, dumps=lambda o: json.dumps(o))


EXAMPLE = '{"model_path": "output/v1"}'


async def _read_json(request: web.Request):
    """The body as JSON, within the size, time and depth limits; ApiError otherwise."""
    try:
        raw = await asyncio.wait_for(request.read(), BODY_TIMEOUT_S)
    except asyncio.TimeoutError:
        raise ApiError(408, f"the request body did not arrive within {BODY_TIMEOUT_S:.0f}s: send it in one go "
                            f"with a correct Content-Length", "body_timeout") from None
    except web.HTTPRequestEntityTooLarge:
        raise ApiError(413, f"the body is larger than {MAX_BODY_BYTES} bytes: send only {EXAMPLE}",
                       "too_large") from None
    except ConnectionError:
        raise ApiError(400, "the connection closed before the body was complete", "incomplete_body") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, f"the body is not UTF-8 text: send JSON like {EXAMPLE}", "bad_json") from None
    if _nesting(text) > MAX_JSON_DEPTH:
        raise ApiError(400, f"the JSON nests deeper than {MAX_JSON_DEPTH} levels: send a flat object like {EXAMPLE}",
                       "too_deep")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise ApiError(400, f"the body must be JSON like {EXAMPLE}", "bad_json") from None


def _model_path(body) -> str:
    if not isinstance(body, dict):
        raise ApiError(400, f"the body must be a JSON object like {EXAMPLE}", "bad_json")
    if body.get("model_path") in (None, ""):
        # AutoRL-Bench's exact message (agents may match it); how to fix it is in `hint`.
        raise ApiError(400, "Missing model_path", "bad_request",
                       {"hint": f'give "model_path": a folder inside output/, e.g. {EXAMPLE}'})
    value = body["model_path"]
    if not isinstance(value, str):
        raise ApiError(400, f'"model_path" must be a string (got {type(value).__name__}), e.g. {EXAMPLE}',
                       "bad_request")
    return value


def _nesting(text: str) -> int:
    """How deeply arrays/objects nest in JSON text (brackets inside strings do not count); checked
    before parsing so a deep document is refused without recursing through it."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_JSON_DEPTH:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


@web.middleware
async def _json_errors(request: web.Request, handler):
    """Every answer is JSON: aiohttp's own errors (404, 405, 413, ...) and ours; a harness bug is a
    500 that says so, never a traceback to the agent."""
    try:
        return await handler(request)
    except ApiError as exc:
        response = _error(exc.status, str(exc), exc.code, exc.extra)
        if exc.status in (408, 413):
            response.force_close()
        return response
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _error(exc.status, f"{exc.reason}: the API has POST submit and GET health, time, submissions "
                                  f"under the URL in $GRADING_SERVER_URL", exc.reason.lower().replace(" ", "_"))
    except Exception as exc:  # noqa: BLE001 - a harness bug: reported as one, recorded in the engine log
        log.exception("grading API: internal error")
        return _error(500, f"internal error in the harness ({type(exc).__name__}); it is not counted against "
                           f"your submission cap: try again, and report it if it persists", "internal")
