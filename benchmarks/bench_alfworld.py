"""ALFWorld grader throughput on this machine (real engine, policies that need no model).

Prints: game generation rate, and the env_success scorer's episodes/s and env steps/s with the
replayed planner (short, winning episodes) and with a "look"-only policy (full-length episodes,
max_steps each). Model inference time is not included: add your model's per-step latency."""

import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
N_PER_TYPE = int(os.environ.get("BENCH_ALFWORLD_N_PER_TYPE", "2"))
MAX_STEPS = int(os.environ.get("BENCH_ALFWORLD_MAX_STEPS", "30"))


def main():
    tmp = Path(tempfile.mkdtemp(prefix="bench_alfworld_"))
    os.environ["ALFWORLD_DATA"] = str(tmp / "alfworld_data")
    from autorl_tui.catalog.tasks import load_task_card, materialize
    from autorl_tui.grading.scorers import get_scorer
    from autorl_tui.grading.types import EvalProtocol, ScorerContext
    from autorl_tui.tasks.alfworld.policies import FixedCommandPolicy, ReplayExpertPolicy

    card = load_task_card(REPO / "autorl_tui" / "tasks" / "alfworld-gen")
    card.data["params"]["source"] = "generated"
    card.data["splits"] = {"dev": {"seed": 2, "n_per_type": N_PER_TYPE, "rooms": "seen"}}
    card.id = "alfworld-bench"
    t0 = time.time()
    split = materialize(card, "dev", tmp / "cache")
    gen_s = time.time() - t0
    items = [json.loads(x) for x in (split / "items.jsonl").read_text().splitlines()]
    print(f"alfworld_games: {len(items)} games")
    print(f"alfworld_generate: {len(items) / gen_s:.2f} games/s (plan + load + planner walkthrough)")

    scorer = get_scorer("env_success")
    for label, policy, max_steps in (("replay_expert", ReplayExpertPolicy(split, items), MAX_STEPS),
                                     ("look_only", FixedCommandPolicy("look"), MAX_STEPS)):
        protocol = EvalProtocol.from_dict({**card.protocol.to_dict(), "max_steps": max_steps})
        ctx = ScorerContext(task_dir=card.dir, split="dev", split_path=split, scratch_dir=tmp,
                            options=card.scorer_options, log=lambda s: None)
        t0 = time.time()
        result = scorer.evaluate(policy, items, protocol, ctx)
        dt = time.time() - t0
        steps = result.metrics["env_steps"]
        print(f"alfworld_grader_{label}_success: {result.score:.1f} %")
        print(f"alfworld_grader_{label}_steps: {steps} steps ({result.metrics['mean_steps']:.1f} per episode, "
              f"max_steps={max_steps})")
        print(f"alfworld_grader_{label}_episodes_per_s: {len(items) / dt:.3f} episodes/s")
        print(f"alfworld_grader_{label}_steps_per_s: {steps / dt:.1f} steps/s")


if __name__ == "__main__":
    main()
