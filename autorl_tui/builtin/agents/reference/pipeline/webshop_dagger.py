"""Online rollouts for WebShop: the model plays train instructions exactly as the grader would
(the workspace's `webshop_api`: same prompts, greedy, same parsing and step accounting), and the
expert, which reads only the prompt, labels every state the model reaches (DAgger).

Imitation alone trains on the pages the expert visits; a model that makes one wrong move (an
option clicked twice, a wrong product opened) is then on a page it never saw and often loops until
the step limit. The labels of the pages it reaches, added to the expert's own steps, are the next
SFT round's data. The rollouts' rewards and wins are reported too (the on-policy train success).

Prints one JSON line {"stage": "dagger", ...}; writes prompt/completion jsonl to --out."""
import argparse
import json
import os
import random
import sys
import time

from common import make_generate, setup_threads


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", default=os.environ.get("DATA_PATH", "data"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--episodes", type=int, default=64, help="train instructions played (a random sample)")
    ap.add_argument("--max_steps", type=int, default=15, help="the grader's step limit")
    ap.add_argument("--batch", type=int, default=16, help="episodes advanced together")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stop_at", type=float, default=0.0, help="epoch seconds: stop playing")
    a = ap.parse_args()
    setup_threads()
    sys.path.insert(0, os.path.abspath(a.data))
    from webshop_api import list_episodes, run_episodes, summarize_rewards
    from webshop_api.experts import expert_generate

    t0 = time.time()
    episodes = list_episodes(a.data)
    random.Random(f"dagger/{a.seed}").shuffle(episodes)
    model_generate = make_generate(a.model, max_new_tokens=32)
    labels = []

    def generate(prompts):
        replies = model_generate(prompts)
        for prompt, reply, label in zip(prompts, replies, expert_generate(prompts)):
            labels.append({"source": "dagger", "agree": reply.strip().lower() == label, "prompt": prompt,
                           "completion": [{"role": "assistant", "content": label}]})
        return replies

    results = []
    for start in range(0, a.episodes, a.batch):
        if a.stop_at and time.time() >= a.stop_at:
            break
        results += run_episodes(generate, episodes[start:start + a.batch], max_steps=a.max_steps,
                                batch_size=a.batch)
    tmp = a.out + ".partial"
    with open(tmp, "w") as fh:
        for row in labels:
            fh.write(json.dumps(row) + "\n")
    os.replace(tmp, a.out)
    print(json.dumps({"stage": "dagger", "played": len(results), "won": sum(r.won for r in results),
                      **summarize_rewards(results), "examples": len(labels),
                      "disagreements": sum(not r["agree"] for r in labels),
                      "total_s": round(time.time() - t0, 1), "out": a.out}), flush=True)


if __name__ == "__main__":
    main()
