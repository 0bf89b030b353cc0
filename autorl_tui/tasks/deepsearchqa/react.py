"""DeepSearchQA under AutoRL-Bench's protocol: the ReAct loop of its evaluator
(rdagent/scenarios/rl/autorl_bench/benchmarks/deepsearchqa/eval.py, `_react_loop`).

- the prompt is one text the model completes (no chat template): its system text, a blank line,
  "Question: <problem>\\nAnswer type: <Single Answer|Set Answer>\\n\\nThought:";
- each step the model completes the text (greedy, 256 tokens, stops "\\nAction:", "\\nThought:",
  "\\nObservation:"; the stop is not kept); its text, stripped, is appended after a space; the
  action is the FIRST `Action: search[...]` or `Action: answer[...]` in that text (case-sensitive,
  the argument may span lines, ends at the first "]", stripped). Because "\\nAction:" is a stop, an
  action on a line of its own is cut off: only one on the thought's line is seen;
- `search[q]`: the observation (the search tool's text) is appended as "\\nObservation: <text>\\nThought:";
- `answer[x]`: the episode ends with x, unless x is "your final answer" (its prompt's placeholder):
  then "\\nThat is not a valid answer. Please think again.\\nThought:" is appended and the loop goes on;
- no action: "\\nAction: answer[" is appended and the model completes it once more in the same step
  (stop "]", 128 tokens): that text, stripped, is the answer, unless it is the placeholder (the loop
  goes on from the text ending in "answer[");
- after 6 steps (`max_steps`) the answer is the last `Action: answer[...]` (not the placeholder) in
  everything the model wrote, else "I don't know", and it is graded like any other answer.

One step of the generic runner is one step of that loop: its reply is the model's text and, when
it held no action, "\\nAction: answer[" and the forced answer followed by "]" (`join_turn`), made by
`two_call_generate` from one batched call and one more for the replies without an action.

Standalone (relative imports only): copied into the agent's workspace with api.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from .tool_loop import PLACEHOLDER, PLACEHOLDER_FEEDBACK, Observation, SearchEpisode
from .episodes import Parsed

SYSTEM_PROMPT = """You are a research assistant that answers questions by searching the web.

You must follow this format strictly:
Thought: [your reasoning]
Action: search[your search query]   <- to search the web
  OR
Action: answer[Paris]   <- to give final answer

Rules:
- Always start with a Thought
- Use search[] to find information
- Use answer[] ONLY when you have enough information
- For Set Answer questions, list all items separated by commas
- Be concise and factual
"""
STOP = ["\nAction:", "\nThought:", "\nObservation:"]
MAX_TOKENS = 256
FORCE = "\nAction: answer["
FORCED_STOP = ["]"]
FORCED_MAX_TOKENS = 128
RETRY = f"\n{PLACEHOLDER_FEEDBACK}\nThought:"
NO_ANSWER = "I don't know"
MAX_STEPS = 6
_ACTION = re.compile(r"Action:\s*(search|answer)\[(.+?)\]", re.S)
_ANSWERS = re.compile(r"Action:\s*answer\[(.+?)\]", re.S)


def first_prompt(question: str, answer_type: str) -> str:
    return f"{SYSTEM_PROMPT}\n\nQuestion: {question}\nAnswer type: {answer_type}\n\nThought:"


def find_action(generated: str) -> tuple[str, str] | None:
    m = _ACTION.search(generated)
    return (m.group(1), m.group(2).strip()) if m else None


def last_answer(trace: str) -> str:
    answers = [a.strip() for a in _ANSWERS.findall(trace) if a.strip().lower() != PLACEHOLDER]
    return answers[-1] if answers else NO_ANSWER


def cut_at_stop(text: str, stop: list[str]) -> str:
    """The text before the first of the stop strings (as vLLM returns it)."""
    at = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    return text if at < 0 else text[:at]


def join_turn(generated: str, forced: str | None) -> str:
    return generated if forced is None else f"{generated}{FORCE}{forced}]"


def split_turn(turn: str) -> tuple[str, str | None]:
    """(the model's text, the forced answer or None) of a step's reply. The model's text cannot
    hold "\\nAction:" (a stop) and the forced answer cannot hold "]" (its stop)."""
    generated, sep, forced = turn.partition(FORCE)
    if not sep:
        return generated, None
    return generated, forced[:-1] if forced.endswith("]") else forced


@dataclass
class Turn:
    text: str
    tokens: int = 0


def _text(reply) -> tuple[str, int]:
    if isinstance(reply, str):
        return reply, 0
    return getattr(reply, "text", "") or "", getattr(reply, "tokens", 0) or 0


def two_call_generate(generate: Callable) -> Callable[[list[list[dict]]], list[Turn]]:
    """The runner's `generate` for this loop: `generate(prompts)` completes every episode's text
    (the protocol's stops are applied again here, as vLLM applies them), then
    `generate(forced, stop=["]"], max_tokens=128)` completes "...\\nAction: answer[" for the
    replies that held no action. Each prompt is one message `{"role": "user", "completion": True,
    "content": text}`."""

    def turns(prompts: list[list[dict]]) -> list[Turn]:
        first = [_text(r) for r in generate(prompts)]
        texts = [cut_at_stop(text, STOP).strip() for text, _ in first]
        need = [i for i, text in enumerate(texts) if find_action(text) is None]
        forced: dict[int, tuple[str, int]] = {}
        if need:
            asks = [[{**prompts[i][-1], "content": f"{prompts[i][-1]['content']} {texts[i]}{FORCE}"}] for i in need]
            replies = generate(asks, stop=FORCED_STOP, max_tokens=FORCED_MAX_TOKENS)
            for i, reply in zip(need, replies):
                text, tokens = _text(reply)
                forced[i] = (cut_at_stop(text, FORCED_STOP).strip(), tokens)
        out = []
        for i, (text, (_, tokens)) in enumerate(zip(texts, first)):
            extra, extra_tokens = forced.get(i, (None, 0))
            out.append(Turn(join_turn(text, extra), tokens + extra_tokens))
        return out

    return turns


def parse(reply: str, obs=None) -> Parsed:
    """The whole turn goes to the episode (it appends it to the text); `text` is the action read."""
    generated, forced = split_turn(reply or "")
    found = find_action(generated)
    action = f"{found[0]}[{found[1]}]" if found else (f"answer[{forced}]" if forced is not None else None)
    return Parsed(action=reply or "", exact=True, text=action)


class ReactSearchEpisode:
    """One question played by AutoRL-Bench's loop; `text` is what the model completes next.
    Tools and grading are SearchEpisode's (`tools="autorl-bench"`)."""

    def __init__(self, item: dict, backend, *, grade=None, reward: str = "correct", max_steps: int = MAX_STEPS):
        self.inner = SearchEpisode(item, backend, grade=grade, reward=reward, tools="autorl-bench")
        self.item = item
        self.task = self.inner.task
        self.task_type = self.inner.task_type
        self.max_steps = max_steps
        self.text = ""
        self.trace = ""
        self.steps = 0

    @property
    def last_answer(self) -> str | None:
        return self.inner.last_answer

    @property
    def last_score(self) -> dict | None:
        return self.inner.last_score

    def reset(self) -> Observation:
        self.inner.reset()
        label = self.item.get("answer_type_label") or ("Set Answer" if self.item.get("answer_type") == "list"
                                                       else "Single Answer")
        self.text = first_prompt(self.task, label)
        self.trace = ""
        self.steps = 0
        return Observation(text=f"Question: {self.task}\nAnswer type: {label}")

    def step(self, turn: str) -> Observation:
        if self.inner.done:
            raise RuntimeError("the episode is over; call reset()")
        generated, forced = split_turn(turn)
        generated = generated.strip()
        self.steps += 1
        self.trace += f"\n{generated}" if self.trace else generated
        self.text += f" {generated}"
        found = find_action(generated)
        if found is None:
            if forced is None:
                raise ValueError("a reply without an action needs its forced answer: play through two_call_generate")
            forced = forced.strip()
            self.text += FORCE
            self.trace += f"\n{forced}" if forced else ""
            if forced.lower() == PLACEHOLDER:
                return self._go_on(PLACEHOLDER_FEEDBACK)
            return self._answer(forced)
        tool, arg = found
        if tool == "answer":
            if arg.lower() == PLACEHOLDER:
                self.text += RETRY
                return self._go_on(PLACEHOLDER_FEEDBACK)
            return self._answer(arg)
        seen = self.inner.step(f"search[{arg}]").text
        self.text += f"\nObservation: {seen}\nThought:"
        return self._go_on(seen)

    def _go_on(self, feedback: str) -> Observation:
        if self.steps >= self.max_steps:
            return self._answer(last_answer(self.trace))
        return Observation(text=feedback, moves=self.steps)

    def _answer(self, answer: str) -> Observation:
        obs = self.inner.step(f"answer[{answer}]")
        obs.moves = self.steps
        return obs

    def close(self) -> None:
        self.inner.close()
