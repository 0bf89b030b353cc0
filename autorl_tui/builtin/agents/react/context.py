"""Context management for long runs: the system prompt and the task (the first two messages) are
never touched; tool outputs older than the last few messages are cut to a head and tail; when
the conversation is still too long, older assistant texts are shortened too. Messages are never
dropped (tool calls must keep their results), only shortened."""

from __future__ import annotations

MARK = "[older output shortened]"


def _size(messages: list[dict]) -> int:
    total = 0
    for m in messages:
        total += len(m.get("content") or "")
        for tc in m.get("tool_calls") or []:
            total += len(tc.get("function", {}).get("arguments") or "")
    return total


def _shorten(text: str, keep: int) -> str:
    if len(text) <= keep + len(MARK) + 8:
        return text
    half = keep // 2
    return f"{text[:half]}\n{MARK}\n{text[-half:]}"


def trim(messages: list[dict], keep_recent: int = 8, old_tool_chars: int = 600,
         max_chars: int = 80_000) -> list[dict]:
    """Shortens in place and returns `messages`."""
    protected = 2
    old = range(protected, max(protected, len(messages) - keep_recent))
    for i in old:
        m = messages[i]
        if m.get("role") == "tool" and m.get("content"):
            m["content"] = _shorten(m["content"], old_tool_chars)
    for keep in (200, 60):
        if _size(messages) <= max_chars:
            break
        for i in old:
            m = messages[i]
            if m.get("content") and m.get("role") in ("tool", "assistant"):
                m["content"] = _shorten(m["content"], keep)
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function", {})
                if len(fn.get("arguments") or "") > 2000:
                    fn["arguments"] = '{"note": "arguments of an old call, shortened"}'
    return messages
