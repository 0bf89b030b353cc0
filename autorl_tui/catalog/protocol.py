"""The evaluation protocol of a task card (part of the card, so it lives in the catalog; the grader
reads it through `grading/types.py`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class EvalProtocol:
    """How a model is evaluated on a task. Part of the task card; hashed for the baseline cache."""
    temperature: float = 0.0
    top_p: float = 1.0
    n: int = 1
    max_tokens: int = 64
    max_steps: int | None = None      # interactive tasks
    prompt_format: str = "chat"       # chat: messages through the tokenizer's chat template; plain: raw text
    system_prompt: str | None = None
    batch_size: int = 64
    seed: int = 0
    stop: list[str] | None = None
    k: list[int] = field(default_factory=lambda: [1])   # pass@k values to report when n > 1

    @classmethod
    def from_dict(cls, data: dict | None) -> "EvalProtocol":
        data = dict(data or {})
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown protocol field(s) {unknown}; known: {sorted(known)}")
        return cls(**data)

    def to_dict(self) -> dict:
        return asdict(self)
