"""The generic batched episode runner of interactive tasks.

Standalone on purpose (standard library only, no harness import): a task copies this file into
the agent's workspace beside its own hooks (ALFWorld: `alfworld_api/episodes.py`), so an agent's
rollouts and the grader play with the same loop, prompts and step accounting.

    records = run_episodes(generate, items, open_episode=..., build_prompt=..., parse_reply=...,
                           max_steps=30, batch_size=16)

What a task provides (its hooks):

- `open_episode(item) -> episode`: an object with `reset() -> observation`,
  `step(action) -> observation` and `close()`; after `reset()` its optional attributes `task`
  (the goal shown to the policy) and `task_type` (the category) fill the record. An exception
  while opening or resetting makes that episode a failed record with `error`, not a failed run.
- an observation has `text` (the intro at reset, the feedback after a step), `admissible` (the
  actions accepted now; empty when free-form), `won`, `done` and `reward` (this step's).
- `build_prompt(state) -> chat messages` (a list of `{"role", "content"}`): the exact prompt the
  grader sends, from an `EpisodeState`: `item`, `intro` (the text at reset), `history` (the
  `(action, feedback)` pairs so far), `obs` (the current observation), `record`.
- `parse_reply(reply, obs) -> Parsed`: the reply text as `Parsed(action, exact, thought, text)`:
  `action` is what to step the environment with (None: no move), `exact` whether the reply was
  exactly an admissible action, `thought` a reasoning part, `text` the action as written.

`items` are dicts with `id` (unique), and optionally `gamefile` (where the episode is defined:
a file, URL, seed...) and `task_type` (the category; else the episode's `task_type`).

Step accounting (every reply costs a step):
- a thought alone (`action` and `text` None, `thought` set): `thought_steps`, feedback
  `thought_feedback` ("OK."), no move;
- no action (`action` None): `invalid_steps` and `unmatched_steps`, feedback `invalid_feedback`
  ("Nothing happens."), no move;
- otherwise the environment steps; a reply that was not `exact` also counts in `invalid_steps`.
An episode ends when it is won, its observation is `done`, a step raised (`error`), its prompt
was refused for the model's context (`error`, the step recorded with `refused`), or it took
`max_steps` steps. `generate(prompts)` gets one prompt per live episode (up to `batch_size`;
every live episode advances one step per call) and returns one reply per prompt: a string, or
an object with `.text` (and `.tokens`, summed into `tokens`). A finished episode's slot goes to
the next item. `log(line)` hears each finished episode, `on_progress(done, total)` each step.
Records come back in the order of `items`; each holds the full `trajectory` (one dict per step:
step, observation, admissible, prompt (the last message), raw_output, thought, command_text,
action, exact, feedback, won).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Protocol

# generate(prompts) -> one reply per prompt: a string, or an object with .text (and .tokens)
Generate = Callable[[list[list[dict]]], list]

THOUGHT_FEEDBACK = "OK."
# A reply whose prompt the backend refused (no room in the model's context) has this finish_reason
# and its reason in `.error` (grading/context_budget.py): the episode ends there with that error.
REFUSED = "prompt_too_long"
INVALID_FEEDBACK = "Nothing happens."


class Observation(Protocol):
    """What an episode says after reset() or a step."""
    text: str
    admissible: list[str]
    won: bool

    @property
    def reward(self) -> float: ...

    @property
    def done(self) -> bool: ...


class Episode(Protocol):
    """One episode, playable repeatedly: reset() then step(action) until done."""
    task: str                 # the goal, known after reset()
    task_type: str

    def reset(self) -> Observation: ...
    def step(self, action: str) -> Observation: ...
    def close(self) -> None: ...


@dataclass
class Parsed:
    """A reply read by the task's `parse_reply`."""
    action: str | None           # what to step the environment with; None: no move this step
    exact: bool = True           # the reply was exactly an admissible action
    thought: str | None = None   # a reasoning part, if any
    text: str | None = None      # the action as written (recorded as command_text)


@dataclass
class EpisodeRecord:
    """One finished episode and its trajectory."""
    game_id: str                 # the item's id
    gamefile: str                # where the episode was defined
    task_type: str               # its category; success rates are also reported per category
    task: str = ""               # the goal as shown to the policy
    won: bool = False
    steps: int = 0
    invalid_steps: int = 0       # replies that were not exactly an admissible action
    unmatched_steps: int = 0     # ...of which no action was made (no move)
    thought_steps: int = 0
    tokens: int = 0
    trajectory: list[dict] = field(default_factory=list)
    error: str | None = None
    reward: float = 0.0          # the sum of the steps' rewards

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class EpisodeState:
    """A live episode, as `build_prompt` sees it."""
    item: dict
    episode: Any
    obs: Any
    intro: str
    record: EpisodeRecord
    history: list[tuple[str, str]] = field(default_factory=list)


def _open(item: dict, open_episode: Callable[[dict], Episode]) -> EpisodeState:
    episode = open_episode(item)
    record = EpisodeRecord(game_id=str(item.get("id", item.get("gamefile"))), gamefile=item.get("gamefile") or "",
                           task_type=item.get("task_type") or getattr(episode, "task_type", "") or "")
    obs = episode.reset()
    record.task = getattr(episode, "task", "") or ""
    return EpisodeState(item=item, episode=episode, obs=obs, intro=obs.text, record=record)


def _reply_text(reply) -> tuple[str, int]:
    tokens = getattr(reply, "tokens", None)
    if not isinstance(reply, str):      # a Completion-like object (text, tokens, finish_reason)
        reply = getattr(reply, "text", "") or ""
    return reply, tokens or 0


def _play_step(ep: EpisodeState, messages: list[dict], reply, parse_reply, thought_feedback: str,
               invalid_feedback: str) -> bool:
    """Apply one reply to one episode; True when the step ended it (won, done or error)."""
    res = ep.record
    refused = getattr(reply, "error", None) if getattr(reply, "finish_reason", None) == REFUSED else None
    reply, tokens = _reply_text(reply)
    res.tokens += tokens
    if refused:     # the prompt outgrew the model's context: the episode ends failed, the reason kept
        res.error = refused
        res.steps += 1
        res.trajectory.append({"step": res.steps, "observation": ep.obs.text, "admissible": ep.obs.admissible,
                               "prompt": messages[-1]["content"], "raw_output": "", "refused": refused})
        return True
    p = parse_reply(reply, ep.obs)
    record = {"step": res.steps + 1, "observation": ep.obs.text, "admissible": ep.obs.admissible,
              "prompt": messages[-1]["content"], "raw_output": reply, "thought": p.thought,
              "command_text": p.text, "action": p.action, "exact": p.exact}
    done = False
    try:
        if p.action is None and p.text is None and p.thought is not None:
            res.thought_steps += 1
            feedback, won = thought_feedback, False
            history_action = f"think: {p.thought}"
        elif p.action is None:
            res.invalid_steps += 1
            res.unmatched_steps += 1
            feedback, won = invalid_feedback, False
            history_action = (p.text or "").strip()[:80]
        else:
            if not p.exact:
                res.invalid_steps += 1
            ep.obs = ep.episode.step(p.action)
            feedback, won = ep.obs.text, bool(ep.obs.won)
            res.reward += float(getattr(ep.obs, "reward", 0.0) or 0.0)
            done = bool(getattr(ep.obs, "done", False))
            history_action = p.action
    except Exception as exc:
        res.error = f"{type(exc).__name__}: {exc}"
        feedback, won, history_action = "", False, p.action or ""
    res.steps += 1
    record.update(feedback=feedback, won=won)
    res.trajectory.append(record)
    ep.history.append((history_action, feedback))
    if won:
        res.won = True
    return won or done or res.error is not None


def run_episodes(generate: Generate, items: list[dict], *, open_episode: Callable[[dict], Episode],
                 build_prompt: Callable[[EpisodeState], list[dict]],
                 parse_reply: Callable[[str, Any], Parsed], max_steps: int = 30, batch_size: int = 16,
                 thought_feedback: str = THOUGHT_FEEDBACK, invalid_feedback: str = INVALID_FEEDBACK,
                 log: Callable[[str], None] | None = None,
                 on_progress: Callable[[int, int], None] | None = None) -> list[EpisodeRecord]:
    """Play every item's episode once, batched (see the module docstring); records in order."""
    results: dict[int, EpisodeRecord] = {}
    pending = list(enumerate(items))
    live: dict[int, EpisodeState] = {}

    def refill():
        while pending and len(live) < batch_size:
            idx, item = pending.pop(0)
            try:
                live[idx] = _open(item, open_episode)
            except Exception as exc:  # an unloadable episode is a failed episode, not a crashed run
                results[idx] = EpisodeRecord(game_id=str(item.get("id", item.get("gamefile"))),
                                             gamefile=str(item.get("gamefile") or ""),
                                             task_type=item.get("task_type", ""),
                                             error=f"{type(exc).__name__}: {exc}")

    refill()
    while live:
        order = sorted(live)
        prompts = [build_prompt(live[i]) for i in order]
        replies = generate(prompts)
        if len(replies) != len(prompts):
            raise RuntimeError(f"generate returned {len(replies)} replies for {len(prompts)} prompts")
        for i, messages, reply in zip(order, prompts, replies):
            ep = live[i]
            ended = _play_step(ep, messages, reply, parse_reply, thought_feedback, invalid_feedback)
            if ended or ep.record.steps >= max_steps:
                ep.episode.close()
                results[i] = ep.record
                del live[i]
                if log:
                    log(f"episode {ep.record.game_id}: {'won' if ep.record.won else 'lost'} "
                        f"in {ep.record.steps} steps")
        if on_progress:
            on_progress(len(results), len(items))
        refill()
    return [results[i] for i in range(len(items))]
