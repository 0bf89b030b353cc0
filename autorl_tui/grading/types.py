"""Types shared by the grader worker, the inference backends and the scorers."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol as TypingProtocol

from autorl_tui.catalog.protocol import EvalProtocol
from autorl_tui.scores import FAILURE_KINDS

__all__ = ["FAILURE_KINDS", "EvalProtocol", "Completion", "Policy", "SampleResult", "EvalResult",
           "ScorerContext", "Scorer"]


@dataclass
class Completion:
    text: str
    tokens: int
    finish_reason: str  # "stop" | "length" | "prompt_too_long" (refused: grading/context_budget.py)
    error: str | None = None            # why the prompt was refused (finish_reason prompt_too_long)
    budget: int | None = None           # the new tokens this prompt could get (max_tokens, capped by the context)
    prompt_tokens: int | None = None


class Policy(TypingProtocol):
    """What scorers call to get model outputs. Implemented by the inference backends."""

    def generate(self, prompts: list[Any], *, n: int = 1, temperature: float = 0.0, top_p: float = 1.0,
                 max_tokens: int = 64, stop: list[str] | None = None) -> list[list[Completion]]:
        """prompts: chat message lists (prompt_format 'chat') or strings. Returns n completions each."""
        ...


@dataclass
class SampleResult:
    sample_id: str
    prompt: str | None = None
    output: str | None = None
    extracted: str | None = None
    expected: str | None = None
    correct: bool | None = None
    score: float | None = None          # 0..1 for this sample
    tokens: int | None = None
    failure_kind: str | None = None     # one of FAILURE_KINDS, None when correct
    error: str | None = None
    data: dict | None = None            # scorer-specific detail (trajectory, test log, verdicts)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class EvalResult:
    score: float                         # primary metric on a 0-100 scale
    metrics: dict[str, Any]
    samples: list[SampleResult]
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"score": self.score, "metrics": self.metrics, "timings": self.timings,
                "samples": [s.to_dict() for s in self.samples]}


@dataclass
class ScorerContext:
    task_dir: Path
    split: str
    split_path: Path                     # the split's materialized data (JSONL file or folder)
    scratch_dir: Path                    # private temp space for this evaluation
    options: dict[str, Any]              # scorer options from the task card / command line
    seed: int = 0
    log: Callable[[str], None] = print
    # progress(done, total, stage): a scorer whose work is not one batched generation over the
    # items (episodes, slow scoring) reports its own units here; stage names the unit.
    progress: Callable[[int, int, str], None] = lambda done, total, stage: None


class Scorer(TypingProtocol):
    name: str
    version: str

    def evaluate(self, policy: Policy, items: list[dict], protocol: EvalProtocol,
                 ctx: ScorerContext) -> EvalResult:
        ...
