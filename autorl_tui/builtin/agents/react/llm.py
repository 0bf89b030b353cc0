"""A minimal OpenAI-compatible chat-completions client (urllib; tool calling, no streaming)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request


class LLMError(Exception):
    def __init__(self, message: str, retryable: bool):
        super().__init__(message)
        self.retryable = retryable


def chat_url(driver_url: str) -> str:
    """`http://host:8000/v1` -> .../v1/chat/completions; a bare `http://host:8000` gets /v1."""
    url = driver_url.rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    if urllib.parse.urlparse(url).path in ("", "/"):
        url += "/v1"
    return url + "/chat/completions"


class ChatClient:
    def __init__(self, driver_url: str, model: str, api_key: str | None = None,
                 temperature: float | None = None, max_tokens: int | None = None):
        self.url = chat_url(driver_url)
        self.model = model
        self.api_key = api_key
        self.temperature = temperature
        self.max_tokens = max_tokens

    def complete(self, messages: list[dict], tools: list[dict], timeout: float) -> dict:
        body = {"model": self.model, "messages": messages, "tools": tools, "tool_choice": "auto"}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.max_tokens:
            body["max_tokens"] = self.max_tokens
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                data = json.loads(resp.read().decode("utf-8", "replace"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:500]
            raise LLMError(f"HTTP {exc.code} from {self.url}: {detail}",
                           retryable=exc.code in (408, 409, 429) or exc.code >= 500) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            raise LLMError(f"cannot reach {self.url}: {getattr(exc, 'reason', exc)}", retryable=True) from None
        except ValueError:
            raise LLMError(f"{self.url} answered with something that is not JSON", retryable=True) from None
        if not isinstance(data, dict) or not data.get("choices"):
            raise LLMError(f"unexpected answer from {self.url}: {str(data)[:300]}", retryable=False)
        return data
