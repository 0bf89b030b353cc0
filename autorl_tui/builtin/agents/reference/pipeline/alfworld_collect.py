"""Online trajectory collection for ALFWorld: a reactive expert played in the real engine.

The train split's planner walkthroughs go straight to the object and pick receptacles by their
hidden state, because the planner knows the whole game; a model sees only the grader's prompt
(the room list, the goal, the last five steps, the available commands) and cannot learn to guess
what is not in it. This expert (ReactiveExpert) decides every step from what that prompt shows:
it searches the places in the order the room description lists them (opening closed ones), takes
the first object of the goal's type it sees, and brings it to the first place of the needed type
in the room list. It wins 71 of the 72 shipped train games and all 18 dev games within 30 steps.

Each game is played `--variants` times: once from the start, then after a few random moves, so
the data also holds the states a model reaches after a wrong step. Every expert step is written
as an SFT example in exactly the grader's prompt format, through the workspace's `alfworld_api`:
chat rows for the harness's own protocol, or with `--react` (AutoRL-Bench's protocol) text rows
as the workspace's shipped ones are: `prompt` the ReAct text the grader has the model complete
(worked examples, the task, the full history, `>`), `completion` " <command>\n", the episode
opened by the plan thought the shipped data opens with (answered "OK.").
"""
import argparse
import json
import os
import random
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


APPLIANCE = {"pick_clean_then_place_in_recep": ("clean", "sinkbasin"),
             "pick_heat_then_place_in_recep": ("heat", "microwave"),
             "pick_cool_then_place_in_recep": ("cool", "fridge")}


class ReactiveExpert:
    """The expert policy. Its state is what the grader's prompt shows: the room list, the goal,
    where it is (the last `go to`), what it holds (the available commands offer `move X to` only
    while holding) and whether the held object was cleaned, heated or cooled (a recent step).

    - Hands empty: at a place where an object of the goal's type can be taken (and that is not
      where it put one) take the first; at a closed place open it; else go to the next place in
      the room list, after the current one (wrapping around).
    - Holding, the goal wants it cleaned/heated/cooled and it is not yet: go to the first sink
      basin / microwave / fridge of the room list and do it there.
    - Holding, look-at-in-light goal: use the lamp if it is here, else go on to the next place.
    - Holding, otherwise: go to the first receptacle of the goal's type in the room list (open it
      if closed) and move the object there; pick-two goals then search again from there.
    """

    def __init__(self, task_type, params, intro):
        self.task_type = task_type
        self.kind = params["object_target"].lower()
        self.target = params["parent_target"].lower()
        self.lamp = params["toggle_target"].lower()
        self.places = receptacles(intro)
        self.here = None
        self.holding = None
        self.processed = False
        self.placed = []

    def observe(self, action, feedback):
        if action.startswith("go to "):
            self.here = action[len("go to "):]
        elif action.startswith("take ") and feedback.startswith("You pick up"):
            self.holding, self.processed = " ".join(action.split()[1:3]), False
        elif action.startswith("move ") and feedback.startswith("You move"):
            self.placed.append(action.split(" to ", 1)[1])
            self.holding = None
        elif action.startswith(("clean ", "heat ", "cool ")) and feedback.startswith("You "):
            self.processed = True

    def next_place(self):
        if self.here not in self.places:
            return self.places[0]
        return self.places[(self.places.index(self.here) + 1) % len(self.places)]

    def first(self, kind):
        return next((p for p in self.places if p.rsplit(" ", 1)[0] == kind), None)

    def act(self, admissible):
        here = self.here
        if self.holding is None:
            if here is not None and here not in self.placed:
                takes = sorted(a for a in admissible
                               if re.fullmatch(rf"take {re.escape(self.kind)} \d+ from {re.escape(here)}", a))
                if takes:
                    return takes[0]
            if here is not None and f"open {here}" in admissible:
                return f"open {here}"
            return f"go to {self.next_place()}"
        if self.task_type in APPLIANCE and not self.processed:
            verb, appliance = APPLIANCE[self.task_type]
            return self._use_at(self.first(appliance), f"{verb} {self.holding} with {{}}", admissible)
        if self.task_type == "look_at_obj_in_light":
            uses = sorted(a for a in admissible if a.startswith(f"use {self.lamp} "))
            return uses[0] if uses else f"go to {self.next_place()}"
        if here is not None and here.rsplit(" ", 1)[0] == self.target:
            return self._use_at(here, f"move {self.holding} to {{}}", admissible)
        return self._use_at(self.first(self.target), f"move {self.holding} to {{}}", admissible)

    def _use_at(self, place, template, admissible):
        if place is None:
            raise LookupError(f"the room has no place for {template}")
        if self.here != place:
            return f"go to {place}"
        if template.format(place) in admissible:
            return template.format(place)
        if f"open {place}" in admissible:
            return f"open {place}"
        raise LookupError(f"cannot {template.format(place)}")


def pddl_params(item):
    with open(os.path.join(os.path.dirname(item["gamefile"]), "traj_data.json")) as fh:
        return json.load(fh)["pddl_params"]


def play(game, item, max_steps=40, prefix=0, rng=None):
    """(intro, steps) of an episode the expert won, or None. With `prefix`, the episode starts with
    that many random `go to` moves (not expert steps: they are marked so and not trained on), so
    the data also holds searches that start mid-list, the states a model reaches by mistake."""
    obs = game.reset()
    expert = ReactiveExpert(item["task_type"], pddl_params(item), obs.text)
    intro, steps = obs.text, []
    try:
        for n in range(max_steps):
            if n < prefix:
                action, by_expert = rng.choice([a for a in obs.admissible if a.startswith("go to ")]), False
            else:
                action, by_expert = expert.act(obs.admissible), True
            if action not in obs.admissible:
                return None
            admissible = obs.admissible
            obs = game.step(action)
            expert.observe(action, obs.text)
            steps.append({"admissible": admissible, "action": action, "feedback": obs.text, "expert": by_expert})
            if obs.won:
                return intro, steps
    except LookupError:
        return None
    return None


def chat_example(item, intro, steps):
    """(prompt messages, [the expert's reply]) per expert step, as the harness's own grader prompts."""
    from alfworld_api import build_messages

    history = []
    for s in steps:
        if s["expert"]:
            yield (build_messages(intro, history, s["admissible"], task_type=item["task_type"]),
                   [{"role": "assistant", "content": s["action"]}])
        history.append((s["action"], s["feedback"]))


def react_examples(prompts):
    """(prompt text, " <command>\\n") per expert step, as AutoRL-Bench's loop prompts: the episode
    opens with the plan thought the shipped data opens with (answered "OK.")."""
    from alfworld_api.react import build_prompt, game_name, plan_thought, prompt_key, prompt_prefix

    def example(item, intro, steps):
        key = prompt_key(game_name(item["gamefile"]), item.get("task_type") or "")
        if key is None:
            return
        prefix, history = prompt_prefix(prompts, key), []
        thought = plan_thought(key, pddl_params(item))
        for s in ([{"action": thought, "feedback": "OK.", "expert": True}] if thought else []) + steps:
            if s["expert"]:
                yield build_prompt(prefix, intro, history), f" {s['action']}\n"
            history.append((s["action"], s["feedback"]))

    return example


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.environ.get("DATA_PATH", "data"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--max_steps", type=int, default=40, help="longest episode kept")
    ap.add_argument("--variants", type=int, default=3,
                    help="episodes per game: the first from the start, the others after 1-4 random moves")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stop_at", type=float, default=0.0, help="epoch seconds: stop collecting")
    ap.add_argument("--react", action="store_true",
                    help="AutoRL-Bench's protocol: text rows in the grader's ReAct prompt (react_prompts.json in --data)")
    a = ap.parse_args()
    sys.path.insert(0, os.path.abspath(a.data))
    os.environ.setdefault("ALFWORLD_DATA", os.path.join(os.environ.get("WORKSPACE", "."), ".alfworld"))
    from alfworld_api import AlfworldGame, list_games
    if a.react:
        from alfworld_api.react import ReactGame, load_prompts
        open_game, example = ReactGame, react_examples(load_prompts(split_path=a.data))
    else:
        open_game, example = AlfworldGame, chat_example

    t0 = time.time()
    rng = random.Random(f"collect/{a.seed}")
    games = list_games(a.data)
    examples = episodes = tried = 0
    won_games = set()
    tmp = a.out + ".partial"
    with open(tmp, "w") as fh:
        for variant in range(max(1, a.variants)):
            for item in games:
                if a.stop_at and time.time() >= a.stop_at:
                    break
                game = open_game(item["gamefile"])
                tried += 1
                try:
                    played = play(game, item, a.max_steps, prefix=rng.randint(1, 4) if variant else 0, rng=rng)
                finally:
                    game.close()
                if played is None:
                    continue
                episodes += 1
                won_games.add(item["id"])
                for prompt, completion in example(item, *played):
                    fh.write(json.dumps({"game_id": item["id"], "variant": variant, "prompt": prompt,
                                         "completion": completion}) + "\n")
                    examples += 1
    os.replace(tmp, a.out)
    print(json.dumps({"stage": "collect", "games": len(games), "tried": tried, "episodes": episodes,
                      "games_won": len(won_games), "examples": examples, "total_s": round(time.time() - t0, 1),
                      "out": a.out}), flush=True)


if __name__ == "__main__":
    main()
