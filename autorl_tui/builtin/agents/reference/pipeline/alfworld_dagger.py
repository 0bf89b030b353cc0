"""DAgger for ALFWorld: the model plays the train games online, the reactive expert labels every
state the model reaches.

Imitation alone trains on the states the expert visits; a model that makes one wrong move is then
in a state it never saw (the wrong place, the object put down somewhere else) and often loops.
Here the trained model plays each train game in the real engine exactly as the grader would play
it (same prompts, greedy, the same reply parsing and command matching, unmatched replies cost a
step), and at every step the expert (alfworld_collect.ReactiveExpert, told every command the model
carried out) writes down what it would do. Those labels, added to the expert's own trajectories,
are the next SFT round's data. With `--beta` the expert's command is carried out instead of the
model's in that share of the steps.
"""
import argparse
import json
import os
import random
import sys
import time

from alfworld_collect import ReactiveExpert
from common import make_generate, setup_threads


class Episode:
    def __init__(self, item, game_cls):
        with open(os.path.join(os.path.dirname(item["gamefile"]), "traj_data.json")) as fh:
            params = json.load(fh)["pddl_params"]
        self.item = item
        self.game = game_cls(item["gamefile"])
        self.obs = self.game.reset()
        self.intro = self.obs.text
        self.expert = ReactiveExpert(item["task_type"], params, self.intro)
        self.history = []
        self.steps = 0
        self.won = False
        self.done = False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", default=os.environ.get("DATA_PATH", "data"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--max_steps", type=int, default=30, help="the grader's step limit")
    ap.add_argument("--batch", type=int, default=24, help="episodes advanced together")
    ap.add_argument("--beta", type=float, default=0.0, help="share of steps where the expert's command is carried out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stop_at", type=float, default=0.0, help="epoch seconds: stop playing")
    a = ap.parse_args()
    setup_threads()
    sys.path.insert(0, os.path.abspath(a.data))
    os.environ.setdefault("ALFWORLD_DATA", os.path.join(os.environ.get("WORKSPACE", "."), ".alfworld"))
    from alfworld_api import AlfworldGame, build_messages, list_games
    from alfworld_api.prompts import INVALID_FEEDBACK, match_action, parse_reply

    t0 = time.time()
    rng = random.Random(f"dagger/{a.seed}")
    generate = make_generate(a.model)
    games = list_games(a.data)
    examples = played = won = invalid = steps_total = 0
    tmp = a.out + ".partial"
    with open(tmp, "w") as fh:
        for start in range(0, len(games), a.batch):
            if a.stop_at and time.time() >= a.stop_at:
                break
            episodes = [Episode(item, AlfworldGame) for item in games[start:start + a.batch]]
            try:
                while any(not e.done for e in episodes) and not (a.stop_at and time.time() >= a.stop_at):
                    live = [e for e in episodes if not e.done]
                    prompts = [build_messages(e.intro, e.history, e.obs.admissible, task_type=e.item["task_type"])
                               for e in live]
                    replies = generate(prompts)
                    for e, prompt, reply in zip(live, prompts, replies):
                        try:
                            label = e.expert.act(e.obs.admissible)
                        except LookupError:
                            label = None            # the expert has no way on from here: stop labelling
                        if label is not None and label in e.obs.admissible:
                            fh.write(json.dumps({"game_id": e.item["id"], "source": "dagger", "prompt": prompt,
                                                 "completion": [{"role": "assistant", "content": label}]}) + "\n")
                            examples += 1
                        _, text = parse_reply(reply)
                        command, exact = match_action(text, e.obs.admissible)
                        if label is not None and label in e.obs.admissible and rng.random() < a.beta:
                            command, exact = label, True
                        invalid += not exact
                        if command is None:
                            e.history.append(((text or "").strip()[:80], INVALID_FEEDBACK))
                        else:
                            e.obs = e.game.step(command)
                            e.expert.observe(command, e.obs.text)
                            e.history.append((command, e.obs.text))
                            e.won = e.obs.won
                        e.steps += 1
                        if e.won or e.steps >= a.max_steps or label is None:
                            e.done = True
            finally:
                for e in episodes:
                    e.game.close()
            played += len(episodes)
            won += sum(e.won for e in episodes)
            steps_total += sum(e.steps for e in episodes)
    os.replace(tmp, a.out)
    print(json.dumps({"stage": "dagger", "games": len(games), "played": played, "won": won,
                      "invalid_rate": round(invalid / max(1, steps_total), 3), "examples": examples,
                      "total_s": round(time.time() - t0, 1), "out": a.out}), flush=True)


if __name__ == "__main__":
    main()
