"""The expert's trajectories on the train instructions, and SFT data in the grader's prompt format."""

from __future__ import annotations

import json
from pathlib import Path

from autorl_tui.tasks.webshop.api import list_episodes, run_episodes
from autorl_tui.tasks.webshop.experts import expert_generate
from autorl_tui.tasks.webshop.prompts import SYSTEM_PROMPT
from autorl_tui.tasks.webshop.react_prompt import SYSTEM_PROMPT as REACT_SYSTEM_PROMPT


def write_sft_files(split_dir: Path, *, max_steps: int = 15, history_len: int = 8, prompt: str = "chat") -> dict:
    """Play the expert on every instruction of the split folder; every step of a won episode is one
    example (prompt -> action), in the grader's prompt format (`prompt`: chat or autorl-bench)."""
    episodes = list_episodes(split_dir)
    results = run_episodes(expert_generate, episodes, max_steps=max_steps, batch_size=64, history_len=history_len,
                           prompt=prompt)
    system = REACT_SYSTEM_PROMPT if prompt == "autorl-bench" else SYSTEM_PROMPT
    n_steps = 0
    with open(split_dir / "expert_trajectories.jsonl", "w") as traj, \
            open(split_dir / "sft_chat.jsonl", "w") as chat, \
            open(split_dir / "sft_prompt_completion.jsonl", "w") as pc:
        for res in results:
            traj.write(json.dumps({"id": res.game_id, "instruction": res.task, "won": res.won, "reward": res.reward,
                                   "actions": [s["action"] for s in res.trajectory]}) + "\n")
            if not res.won:
                continue
            for step in res.trajectory:
                messages = [{"role": "system", "content": system}, {"role": "user", "content": step["prompt"]}]
                chat.write(json.dumps({"id": f"{res.game_id}/{step['step']}",
                                       "messages": messages + [{"role": "assistant", "content": step["action"]}]}) + "\n")
                pc.write(json.dumps({"id": f"{res.game_id}/{step['step']}", "prompt": messages,
                                     "completion": [{"role": "assistant", "content": step["action"]}]}) + "\n")
                n_steps += 1
    return {"episodes": len(results), "won": sum(r.won for r in results), "sft_examples": n_steps}
