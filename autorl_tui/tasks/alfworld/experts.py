"""Expert trajectories (the planner's walkthroughs replayed in the engine) as SFT data.

Each step of each expert game becomes one training example whose prompt is exactly what the
grader would send at that step (`prompts.build_messages`) and whose completion is the expert's
command. Two renderings of the same examples: chat `messages` (TRL SFT "conversational") and
`prompt`/`completion` (TRL prompt-completion, loss on the completion only).

Two experts per generated game (expert.json): `steps`, the PDDL planner's walkthrough (it knows
where everything is and goes straight to the object), and `search_steps`, the same plan after
visiting 0-3 wrong receptacles that could have held the object (opening closed ones), which is
what a player who cannot see inside receptacles has to do. The SFT files use the searching expert
when there is one (official games: the planner only).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from autorl_tui.tasks.alfworld.prompts import build_messages


def load_expert(split_dir: Path, item: dict) -> dict:
    return json.loads((split_dir / item["gamefile"]).with_name("expert.json").read_text())


def expert_examples(split_dir: Path, items: list[dict], *, few_shot: bool = False,
                    history_len: int = 5) -> Iterator[dict]:
    for item in items:
        expert = load_expert(split_dir, item)
        history: list[tuple[str, str]] = []
        for n, step in enumerate(expert.get("search_steps") or expert["steps"], 1):
            messages = build_messages(expert["intro"], history, step["admissible"], task_type=item["task_type"],
                                      few_shot=few_shot, history_len=history_len)
            yield {"game_id": item["id"], "task_type": item["task_type"], "step": n,
                   "messages": messages, "completion": step["action"]}
            history.append((step["action"], step["feedback"]))


def write_sft_files(split_dir: Path, items: list[dict], out_dir: Path, *, few_shot: bool = False,
                    history_len: int = 5) -> dict[str, int]:
    """Write sft_chat.jsonl, sft_prompt_completion.jsonl and expert_trajectories.jsonl into out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(out_dir / "sft_chat.jsonl", "w") as chat, open(out_dir / "sft_prompt_completion.jsonl", "w") as pc:
        for ex in expert_examples(split_dir, items, few_shot=few_shot, history_len=history_len):
            meta = {"game_id": ex["game_id"], "task_type": ex["task_type"], "step": ex["step"]}
            answer = {"role": "assistant", "content": ex["completion"]}
            chat.write(json.dumps({**meta, "messages": ex["messages"] + [answer]}) + "\n")
            pc.write(json.dumps({**meta, "prompt": ex["messages"], "completion": [answer]}) + "\n")
            n += 1
    with open(out_dir / "expert_trajectories.jsonl", "w") as fh:
        for item in items:
            expert = load_expert(split_dir, item)
            fh.write(json.dumps({"game_id": item["id"], "task_type": item["task_type"], "gamefile": item["gamefile"],
                                 "intro": expert["intro"], "planner_steps": expert["steps"],
                                 "search_steps": expert.get("search_steps"), "won": expert["won"]}) + "\n")
    return {"sft_examples": n, "trajectories": len(items)}
