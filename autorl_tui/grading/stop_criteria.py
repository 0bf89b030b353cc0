"""Greedy generation ends for a row as soon as its text holds a stop string.

The text a grading keeps is cut at the first stop string after decoding (inference._cut_at_stop),
so tokens generated past it are thrown away; vLLM, the reference's engine, stops there. Without
this a model that writes `click[x]\\n` and goes on talks to its token budget at every step of an
interactive episode. The test is the same one the cut applies: the row's new tokens decoded
as the caller decodes them, searched for each stop string, so a row stops exactly when the cut
would find a stop in what it has written so far.
"""

from __future__ import annotations

from typing import Any, Callable


def stop_when_written(decode: Callable[[list[int]], str], stop: list[str], prompt_width: int,
                      ignore: set[int]) -> Any:
    """A transformers StoppingCriteriaList over a left-padded batch whose prompts end at `prompt_width`."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    stops = [s for s in stop if s]

    class _StopWhenWritten(StoppingCriteria):
        def __init__(self) -> None:
            self.stopped: set[int] = set()     # rows found done: only padded from there on, never decoded again

        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
            for row, ids in enumerate(input_ids[:, prompt_width:].tolist()):
                if row not in self.stopped:
                    text = decode([t for t in ids if t not in ignore])
                    if any(s in text for s in stops):
                        self.stopped.add(row)
                done[row] = row in self.stopped
            return done

    return StoppingCriteriaList([_StopWhenWritten()])
