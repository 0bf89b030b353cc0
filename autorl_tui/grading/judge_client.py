"""A minimal client for an OpenAI-compatible chat-completions endpoint (the LLM judge).

Stdlib only (urllib): the judge scorer is synchronous and runs requests on a thread pool.
Every failure is a `JudgeError` with a message saying what went wrong; nothing is swallowed.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass


class JudgeError(Exception):
    """A judge request failed (timeout, HTTP error, malformed reply)."""


@dataclass
class JudgeReply:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float


def chat_url(base: str) -> str:
    base = base.rstrip("/")
    return base if base.endswith("/chat/completions") else base + "/chat/completions"


def _is_loopback(url: str) -> bool:
    from urllib.parse import urlparse
    host = (urlparse(url).hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


class JudgeClient:
    def __init__(self, url: str, model: str, *, api_key_env: str | None = None, timeout_s: float = 60.0,
                 retries: int = 1, max_tokens: int = 64):
        self.url = chat_url(url)
        self.model = model
        self.timeout_s = timeout_s
        self.retries = max(0, int(retries))
        self.max_tokens = max_tokens
        self.api_key = None
        if api_key_env:
            self.api_key = os.environ.get(api_key_env)
            # A local server (vLLM, llama.cpp, a stand-in) usually needs no key; a remote one does.
            if not self.api_key and not _is_loopback(self.url):
                raise JudgeError(f"the judge's API key is read from ${api_key_env}, which is not set; "
                                 f"export {api_key_env}=... (or set scorer option api_key_env: null for a keyless endpoint)")
        self.requests_sent = 0
        self._count_lock = threading.Lock()   # complete() runs on a thread pool

    def complete(self, messages: list[dict]) -> JudgeReply:
        body = json.dumps({"model": self.model, "messages": messages, "temperature": 0,
                           "max_tokens": self.max_tokens}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            t0 = time.monotonic()
            with self._count_lock:
                self.requests_sent += 1
            try:
                req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    raw = resp.read()
                return self._parse(raw, time.monotonic() - t0)
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:300].decode(errors="replace")
                last = JudgeError(f"judge HTTP {exc.code} from {self.url}: {detail}")
                if exc.code < 500 and exc.code != 429:
                    break   # a client error will not get better by asking again
            except (socket.timeout, TimeoutError):
                last = JudgeError(f"judge timed out after {self.timeout_s:g} s ({self.url})")
            except urllib.error.URLError as exc:
                reason = exc.reason
                if isinstance(reason, (socket.timeout, TimeoutError)):
                    last = JudgeError(f"judge timed out after {self.timeout_s:g} s ({self.url})")
                else:
                    last = JudgeError(f"judge unreachable at {self.url}: {reason}")
            except JudgeError as exc:
                last = exc
                break       # a malformed reply is recorded as such, not retried
            except (OSError, ValueError) as exc:
                last = JudgeError(f"judge request failed: {type(exc).__name__}: {exc}")
            if attempt < self.retries:
                time.sleep(min(2.0, 0.25 * 2 ** attempt))
        assert last is not None
        raise last

    @staticmethod
    def _parse(raw: bytes, latency: float) -> JudgeReply:
        try:
            data = json.loads(raw)
            text = data["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise JudgeError(f"malformed judge reply (not an OpenAI chat completion): {raw[:200]!r}") from None
        if not isinstance(text, str):
            raise JudgeError(f"malformed judge reply: message content is {type(text).__name__}, not text")
        usage = data.get("usage") or {}
        return JudgeReply(text=text, prompt_tokens=int(usage.get("prompt_tokens") or 0),
                          completion_tokens=int(usage.get("completion_tokens") or 0), latency_s=latency)
