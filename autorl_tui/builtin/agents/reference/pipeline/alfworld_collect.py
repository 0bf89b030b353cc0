"""Online trajectory collection for ALFWorld: a sweeping expert played in the real engine.

The train split's planner walkthroughs go straight to the object, because the planner knows where
it is; a player does not, and a small model cannot learn to guess it. This expert searches the
way a small model can learn to: it visits the receptacles in the order the room description lists
them (opening closed ones) until it sees an object of the goal's type, takes it, and then follows
the planner's plan for the rest (with the object it took). Each move depends on little more than
the current place and the room list, so it fits in the grader's window of the last five steps.
It never takes an object back from where it put one (the second object of pick-two games).

Every step is written as an SFT example in exactly the grader's prompt format, through the
workspace's `alfworld_api`, so the training data is what the grader will show.
"""
import argparse
import json
import os
import re
import sys
import time


def receptacles(intro):
    """The receptacles in the order the room description lists them."""
    m = re.search(r"you see (.*?)\.\s*(?:\n|$)", intro)
    if not m:
        return []
    names = []
    for part in m.group(1).split(","):
        part = part.strip()
        for prefix in ("and ", "a ", "an "):
            part = part[len(prefix):] if part.startswith(prefix) else part
        names.append(part.strip())
    return [n for n in names if n]


def segments(plan):
    """Split the planner's plan into (fetch, rest) pairs: a fetch is the walk to an object and its
    `take`, the rest is what the plan does with that object until the next fetch."""
    takes = [i for i, a in enumerate(plan) if a.startswith("take ")]
    out, start = [], 0
    for n, t in enumerate(takes):
        end = takes[n + 1] if n + 1 < len(takes) else len(plan)
        rest = plan[t + 1:end]
        while rest and rest[-1].startswith(("go to ", "open ")) and n + 1 < len(takes):
            rest = rest[:-1]           # the walk to the next object belongs to the next fetch
        out.append((plan[start:t + 1], rest))
        start = t + 1 + len(rest)
    return out


class Player:
    def __init__(self, game, max_steps):
        self.game, self.max_steps = game, max_steps
        self.obs = game.reset()
        self.intro, self.steps, self.here = self.obs.text, [], None

    def do(self, action):
        if action not in self.obs.admissible or len(self.steps) >= self.max_steps:
            raise LookupError(action)
        admissible = self.obs.admissible
        self.obs = self.game.step(action)
        self.steps.append({"admissible": admissible, "action": action, "feedback": self.obs.text})
        if action.startswith("go to "):
            self.here = action[len("go to "):]

    def sweep(self, kind, skip):
        """Visit receptacles in room order until an object of type `kind` can be taken; take it."""
        for place in receptacles(self.intro):
            if place in skip:
                continue
            if place != self.here:
                self.do(f"go to {place}")
                if "is closed" in self.obs.text and f"open {place}" in self.obs.admissible:
                    self.do(f"open {place}")
            found = sorted(a for a in self.obs.admissible
                           if re.fullmatch(rf"take {re.escape(kind)} \d+ from {re.escape(place)}", a))
            if found:
                self.do(found[0])
                return " ".join(found[0].split()[1:3])
        raise LookupError(f"no {kind} found")


def sweeping_expert(game, expert, max_steps=40):
    """(intro, steps) of a won sweeping episode, or None when it cannot be played to a win."""
    plan = [s["action"] for s in expert["steps"]]
    player = Player(game, max_steps)
    placed = set()
    try:
        for fetch, rest in segments(plan):
            planned = " ".join(fetch[-1].split()[1:3])          # e.g. "keychain 2"
            taken = player.sweep(planned.split()[0], placed)
            for action in rest:
                action = re.sub(rf"\b{re.escape(planned)}\b", taken, action)
                player.do(action)
                if action.startswith("move "):
                    placed.add(action.split(" to ", 1)[1])
            if player.obs.won:
                return player.intro, player.steps
    except LookupError:
        return None
    return (player.intro, player.steps) if player.obs.won else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.environ.get("DATA_PATH", "data"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--max_steps", type=int, default=40, help="longest episode kept")
    ap.add_argument("--stop_at", type=float, default=0.0, help="epoch seconds: stop collecting")
    a = ap.parse_args()
    sys.path.insert(0, os.path.abspath(a.data))
    os.environ.setdefault("ALFWORLD_DATA", os.path.join(os.environ.get("WORKSPACE", "."), ".alfworld"))
    from alfworld_api import AlfworldGame, build_messages, list_games

    t0 = time.time()
    games = list_games(a.data)
    examples = episodes = tried = 0
    tmp = a.out + ".partial"
    with open(tmp, "w") as fh:
        for item in games:
            if a.stop_at and time.time() >= a.stop_at:
                break
            with open(os.path.join(os.path.dirname(item["gamefile"]), "expert.json")) as f:
                expert = json.load(f)
            game = AlfworldGame(item["gamefile"])
            tried += 1
            try:
                played = sweeping_expert(game, expert, a.max_steps)
            finally:
                game.close()
            if played is None:
                continue
            intro, steps = played
            episodes += 1
            history = []
            for s in steps:
                prompt = build_messages(intro, history, s["admissible"], task_type=item["task_type"])
                fh.write(json.dumps({"game_id": item["id"], "prompt": prompt,
                                     "completion": [{"role": "assistant", "content": s["action"]}]}) + "\n")
                history.append((s["action"], s["feedback"]))
                examples += 1
    os.replace(tmp, a.out)
    print(json.dumps({"stage": "collect", "games": len(games), "tried": tried, "episodes": episodes,
                      "examples": examples, "total_s": round(time.time() - t0, 1), "out": a.out}), flush=True)


if __name__ == "__main__":
    main()
