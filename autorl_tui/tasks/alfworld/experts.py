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

Under AutoRL-Bench's protocol (`react: autorl-bench`, the `alfworld` card) the same expert steps
are written as the grader's ReAct text instead (`write_react_sft_files`), with no chat files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from autorl_tui.tasks.alfworld.prompts import build_messages
from autorl_tui.tasks.alfworld.react import (build_prompt, game_name, intro_of, plan_thought, process_ob, prompt_key,
                                             prompt_prefix)


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


def react_trajectory(split_dir: Path, item: dict, prompts: dict) -> dict:
    """A game's expert as AutoRL-Bench's loop would play it: the worked-examples prefix of its task
    type, the intro, and the steps as (command, what the grader shows after it): a first
    `think:` naming the plan (answered "OK."), then the planner's walkthrough with the engine's
    own text (`react.process_ob`)."""
    expert = load_expert(split_dir, item)
    if "raw_intro" not in expert:
        raise ValueError(f"{item['id']}: expert.json has no raw engine text; materialize the split again")
    gamefile = split_dir / item["gamefile"]
    key = prompt_key(game_name(str(gamefile)), item.get("task_type") or "")
    if key is None:
        raise ValueError(f"{item['id']}: not one of the six ALFWorld task types")
    params = json.loads(gamefile.with_name("traj_data.json").read_text()).get("pddl_params") or {}
    thought = plan_thought(key, params)
    steps = ([(thought, "OK.")] if thought else []) + [(s["action"], process_ob(s["raw_feedback"]))
                                                      for s in expert["steps"]]
    return {"prefix": prompt_prefix(prompts, key), "intro": intro_of(expert["raw_intro"]), "steps": steps}


def write_react_sft_files(split_dir: Path, items: list[dict], out_dir: Path, prompts: dict) -> dict[str, int]:
    """The expert data in the grader's ReAct text (AutoRL-Bench's protocol, react.py):
    sft_prompt_completion.jsonl (one row per step: `prompt` = the exact text the grader has the
    model complete at that step, `completion` = " <command>\\n"), sft_react.jsonl (one row per game:
    `text` = the whole trajectory as that text, ending after the winning step's observation) and
    expert_trajectories.jsonl (raw). No chat files: the grader sends no chat."""
    out_dir.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(out_dir / "sft_prompt_completion.jsonl", "w") as pc, open(out_dir / "sft_react.jsonl", "w") as full:
        for item in items:
            t = react_trajectory(split_dir, item, prompts)
            meta = {"game_id": item["id"], "task_type": item["task_type"]}
            for step, (action, _) in enumerate(t["steps"], 1):
                pc.write(json.dumps({**meta, "step": step, "prompt": build_prompt(t["prefix"], t["intro"],
                                                                                  t["steps"][:step - 1]),
                                     "completion": f" {action}\n"}) + "\n")
                n += 1
            full.write(json.dumps({**meta, "gamefile": item["gamefile"], "actions": [a for a, _ in t["steps"]],
                                   "text": build_prompt(t["prefix"], t["intro"], t["steps"])}) + "\n")
    _write_trajectories(split_dir, items, out_dir)
    return {"sft_examples": n, "trajectories": len(items)}


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
    _write_trajectories(split_dir, items, out_dir)
    return {"sft_examples": n, "trajectories": len(items)}


def _write_trajectories(split_dir: Path, items: list[dict], out_dir: Path) -> None:
    with open(out_dir / "expert_trajectories.jsonl", "w") as fh:
        for item in items:
            expert = load_expert(split_dir, item)
            fh.write(json.dumps({"game_id": item["id"], "task_type": item["task_type"], "gamefile": item["gamefile"],
                                 "intro": expert["intro"], "planner_steps": expert["steps"],
                                 "search_steps": expert.get("search_steps"), "won": expert["won"]}) + "\n")
