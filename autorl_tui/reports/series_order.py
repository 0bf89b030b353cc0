"""Which training metric series to show first, for the run report and the console alike: the
informative ones (loss, reward, kl, entropy, grad_norm, learning_rate, mean completion length) in
that order, then the rest by name; a series whose value never changes is listed, not charted."""

from __future__ import annotations

INFORMATIVE = (("loss",), ("reward",), ("kl",), ("entropy",), ("grad_norm",), ("learning_rate",),
               ("mean_length", "completion_length"))


def informative_rank(name: str) -> int:
    n = name.lower()
    for i, keys in enumerate(INFORMATIVE):
        if any(k in n for k in keys):
            return i
    return len(INFORMATIVE)


def is_constant(values) -> bool:
    """True when every finite value is the same (a flat all-zero clip_ratio, a fixed learning rate)."""
    seen = {v for v in values if v is not None}
    return len(seen) <= 1
