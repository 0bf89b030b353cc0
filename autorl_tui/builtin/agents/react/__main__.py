"""The built-in `react` agent: a compact ReAct loop over an OpenAI-compatible chat-completions
endpoint with tool calling (shell, write_file, read_file, submit).

    python autorl_tui/builtin/agents/react --prompt-file prompt.md --driver-url URL --model NAME

Standard library only (it runs with the agent runtime's Python in the agent's filtered environment).
Never runs past its deadline: HTTP and tool timeouts are bounded by the time left, and a
watchdog kills a running command and exits at the deadline. Actions go to stdout as JSON lines
(`react_json`); diagnostics to stderr. Exit 0: finished or stopped at the deadline; 1: the
driver failed; 2: bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

from context import trim
from deadline import Clock, find_deadline
from emit import emit, log
from llm import ChatClient, LLMError
from tools import TOOL_SCHEMAS, Tools

VERSION = 1
SYSTEM_PROMPT = """You are an autonomous engineer working in a Linux workspace through tools:
`shell` runs bash commands (your current directory is the workspace), `write_file` and
`read_file` handle files, `submit` sends a checkpoint for grading. Work step by step: look
around, plan briefly, act, check results, fix problems. Keep going until the task is done or
the time budget runs out; when you are finished, answer without calling a tool, with a short
summary of what you did."""


def parse_args(argv):
    p = argparse.ArgumentParser(prog="react", description=__doc__.split("\n\n")[0])
    p.add_argument("--prompt-file", required=True)
    p.add_argument("--driver-url", default=os.environ.get("DRIVER_URL"),
                   help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1 (env DRIVER_URL)")
    p.add_argument("--model", default=os.environ.get("DRIVER_MODEL"), help="model name (env DRIVER_MODEL)")
    p.add_argument("--workspace", default=os.environ.get("WORKSPACE") or ".")
    p.add_argument("--deadline", help="epoch seconds or ISO time (RUN_DEADLINE and run_meta.json win if earlier)")
    p.add_argument("--max-seconds", type=float)
    p.add_argument("--max-steps", type=int, default=200)
    p.add_argument("--request-timeout", type=float, default=600.0)
    p.add_argument("--retries", type=int, default=3, help="retries of a failed LLM call")
    p.add_argument("--tool-timeout", type=float, default=1800.0)
    p.add_argument("--temperature", type=float)
    p.add_argument("--max-context-chars", type=int, default=80_000)
    return p.parse_args(argv)


def start_watchdog(clock: Clock, tools: Tools) -> None:
    """At the deadline: kill the running command, say so, exit — whatever the main thread is
    blocked on (an HTTP call, a command)."""
    if clock.deadline is None:
        return

    def fire():
        tools.kill_running()
        emit("error", text="deadline reached: stopping", extra={"reason": "deadline"})
        os._exit(0)

    t = threading.Timer(max(0.0, clock.remaining()), fire)
    t.daemon = True
    t.start()


def call_llm(client: ChatClient, messages, clock: Clock, request_timeout: float,
             retries: int = 3) -> dict | None:
    """One completion with a few retries (backoff 1, 2, 4 s ...); None when the deadline came first."""
    delay = 1.0
    for attempt in range(retries + 1):
        if clock.remaining() <= 0:
            return None
        try:
            return client.complete(messages, TOOL_SCHEMAS, timeout=clock.bound(request_timeout))
        except LLMError as exc:
            if clock.remaining() <= 0:
                return None
            emit("error", text=str(exc), extra={"attempt": attempt + 1})
            if not exc.retryable or attempt == retries:
                raise
            time.sleep(min(delay, max(0.0, clock.remaining())))
            delay *= 2
    return None


def remaining_note(clock: Clock) -> str:
    r = clock.remaining()
    if r == float("inf"):
        return ""
    return f"\n[time left: {int(r // 60)} min {int(r % 60)} s]"


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.time()
    if not args.driver_url or not args.model:
        log("react: need --driver-url and --model (or DRIVER_URL and DRIVER_MODEL)")
        return 2
    try:
        prompt = Path(args.prompt_file).read_text()
    except OSError as exc:
        log(f"react: cannot read the prompt file {args.prompt_file}: {exc.strerror}")
        return 2
    workspace = Path(args.workspace).resolve()
    clock = Clock(find_deadline(workspace, args.deadline, args.max_seconds, started))
    tools = Tools(workspace, clock, default_timeout_s=args.tool_timeout)
    client = ChatClient(args.driver_url, args.model, os.environ.get("DRIVER_API_KEY"), args.temperature)
    emit("start", agent="react", version=VERSION, model=args.model, driver_url=client.url,
         deadline=clock.deadline)
    start_watchdog(clock, tools)

    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}]
    for step in range(args.max_steps):
        try:
            data = call_llm(client, messages, clock, args.request_timeout, args.retries)
        except LLMError:
            return 1
        if data is None:
            emit("error", text="deadline reached: stopping", extra={"reason": "deadline"})
            return 0
        usage = data.get("usage") or {}
        if usage:
            cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
            emit("usage", tokens_in=usage.get("prompt_tokens"), tokens_out=usage.get("completion_tokens"),
                 cache_read=cached or None)
        choice = data["choices"][0]
        msg = choice.get("message") or {}
        calls = msg.get("tool_calls") or []
        content = msg.get("content") or ""
        reasoning = msg.get("reasoning_content") or msg.get("reasoning")
        if reasoning:
            emit("reasoning", text=str(reasoning))
        if content.strip():
            emit("message", role="assistant", text=content)
        messages.append({"role": "assistant", "content": content or None,
                         **({"tool_calls": calls} if calls else {})})
        if not calls:
            return 0                                        # the model says it is done
        for call in calls:
            fn = call.get("function") or {}
            name, call_id = fn.get("name", "?"), call.get("id") or f"call_{step}"
            try:
                call_args = json.loads(fn.get("arguments") or "{}")
                if not isinstance(call_args, dict):
                    raise ValueError("arguments must be a JSON object")
            except ValueError as exc:
                text = f"could not parse the arguments of {name}: {exc}"
                emit("tool_result", name=name, output=text, is_error=True, call_id=call_id)
                messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
                continue
            emit("tool_call", name=name, input=call_args, call_id=call_id)
            text, action = tools.run(name, call_args)
            kind = action.pop("kind")
            emit(kind, call_id=call_id, **action)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": text + remaining_note(clock)})
        trim(messages, max_chars=args.max_context_chars)
    emit("error", text=f"stopped after --max-steps {args.max_steps} model calls", extra={"reason": "max_steps"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
