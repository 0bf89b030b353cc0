"""How many new tokens one prompt may get, and when a prompt cannot be run at all: vLLM's rules,
per prompt, whatever else shares its batch (docs/grading.md, "A prompt and the model's context").

vLLM (AutoRL-Bench's inference) checks every request on its own against `max_model_len`: an empty
prompt, and a prompt of `max_model_len` tokens or more, is refused (a ValueError naming the prompt's
length); otherwise generation stops at `max_tokens` new tokens or when prompt + output reaches
`max_model_len`, whichever comes first (finish reason `length`). Here the limit is the model's
positions (`max_position_embeddings`) for the transformers backend, the engine's `max_model_len`
for vLLM. A refused prompt is not a crash of the grading: its sample gets no output, the failure
kind `prompt_too_long` and the reason below.
"""

from __future__ import annotations

from autorl_tui.grading.types import Completion

REFUSED = "prompt_too_long"          # the failure kind, and a completion's finish_reason


def refusal(prompt_tokens: int, limit: int | None) -> str | None:
    """Why a prompt of `prompt_tokens` tokens cannot be generated from under a context of `limit`
    positions (None: it can). vLLM's conditions: empty, or no room for one new token."""
    if prompt_tokens <= 0:
        return "the prompt is empty (0 tokens): vLLM refuses an empty prompt"
    if limit and prompt_tokens >= limit:
        return (f"the prompt has {prompt_tokens} tokens and the model's context holds {limit}: no room for a "
                f"single new token (vLLM refuses it: prompt length >= max_model_len); the sample scores 0")
    return None


def refused_completions(why: str, prompt_tokens: int, n: int) -> list[Completion]:
    """The n completions of a prompt refused for `why` (no output, no budget)."""
    return [Completion(text="", tokens=0, finish_reason=REFUSED, error=why, budget=0, prompt_tokens=prompt_tokens)] * n


def refused(completion) -> str | None:
    """Why a completion's prompt was refused (its sample's `error`), or None when it was run."""
    if getattr(completion, "finish_reason", None) == REFUSED:
        return getattr(completion, "error", None) or "the prompt does not fit the model's context"
    return None


def budget(prompt_tokens: int, max_tokens: int, limit: int | None) -> int:
    """New tokens this prompt may get: `max_tokens`, capped so that prompt + output fits the
    context (for a prompt `refusal` accepted, at least 1)."""
    if not limit:
        return max_tokens
    return max(1, min(max_tokens, limit - prompt_tokens))


class Tally:
    """The grading's `metrics.context`, over every generate call of a grading: the limit, the
    prompts, how many were refused and how many got fewer new tokens than asked because of the
    context."""

    def __init__(self, limit: int | None):
        self.limit = limit
        self.prompts = self.refused = self.capped = 0

    def add(self, outputs: list, max_tokens: int) -> None:
        for per_prompt in outputs:
            first = per_prompt[0] if per_prompt else None
            self.prompts += 1
            if getattr(first, "finish_reason", None) == REFUSED:
                self.refused += 1
            elif (budget := getattr(first, "budget", None)) is not None and budget < max_tokens:
                self.capped += 1

    def to_dict(self) -> dict:
        return {"limit": self.limit, "prompts": self.prompts, "prompts_refused": self.refused,
                "budget_capped": self.capped}
