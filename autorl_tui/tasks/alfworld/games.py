"""Generate ALFWorld games in the engine's own format from the room layouts bundled with alfworld.

A game is a folder with `game.tw-pddl` (JSON: alfworld's `alfred.pddl` domain, its `alfred.twl2`
grammar with the task sentence filled in, our PDDL problem) and `traj_data.json` (`task_type`,
`pddl_params`), exactly what `AlfredTWEnv` reads. Rooms come from
`alfworld/gen/layouts/FloorPlan*-{openable,objects}.json` (receptacle poses and object types);
objects are placed at random in receptacles that can hold them (`constants.VAL_RECEPTACLE_OBJECTS`).

Planning a game (`plan_game`) is cheap and pure; validating it (`validate_game`: load in the real
engine, replay the planner's walkthrough, require a win) costs about a second. A split is the
first `n_per_type` validated games of a seeded candidate stream per task type, so it is
deterministic by seed. Test games come from rooms held out of train/dev ("unseen").
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from autorl_tui.tasks.alfworld.game import AlfworldGame, ensure_alfworld_data

TASK_TYPES = ("pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
              "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place")

SCENES = {"Kitchen": range(1, 31), "LivingRoom": range(201, 231), "Bedroom": range(301, 331),
          "Bathroom": range(401, 431)}
ROOMS_FOR_TASK = {
    "pick_and_place_simple": ("Kitchen", "LivingRoom", "Bathroom", "Bedroom"),
    "pick_two_obj_and_place": ("Kitchen", "LivingRoom", "Bathroom", "Bedroom"),
    "look_at_obj_in_light": ("LivingRoom", "Bedroom"),
    "pick_clean_then_place_in_recep": ("Kitchen", "Bathroom"),
    "pick_heat_then_place_in_recep": ("Kitchen",),
    "pick_cool_then_place_in_recep": ("Kitchen",),
}
# Test ("unseen") rooms: every fifth room of each scene type; train and dev never use them.
UNSEEN_ROOMS = frozenset(n for r in SCENES.values() for n in r if n % 5 == 0)

TOOLS = {"pick_clean_then_place_in_recep": ("Cleanable", ("SinkBasin", "BathtubBasin")),
         "pick_heat_then_place_in_recep": ("Heatable", ("Microwave",)),
         "pick_cool_then_place_in_recep": ("Coolable", ("Fridge",))}
TOOL_TYPES = {"SinkBasin", "BathtubBasin", "Microwave", "Fridge"}
LAMPS = ("DeskLamp", "FloorLamp")
LAMP_HOSTS = ("Desk", "SideTable", "Dresser", "Shelf", "CoffeeTable", "DiningTable", "TVStand")
SLICED = {"AppleSliced", "BreadSliced", "LettuceSliced", "PotatoSliced", "TomatoSliced"}
START = "loc_bar_0_bar_0_bar_0_bar_30_start"

_MANGLE = {"-": "_minus_", "|": "_bar_", "+": "_plus_", ".": "_dot_", ",": "_comma_"}


def mangle(s: str) -> str:
    return "".join(_MANGLE.get(ch, ch) for ch in s)


def _constants():
    ensure_alfworld_data()
    import alfworld.gen.constants as C
    return C


def layouts_dir() -> Path:
    return Path(_constants().__file__).parent / "layouts"


def rooms(kind: str = "seen") -> list[int]:
    """Floor plans with a bundled layout: 'seen' (train/dev), 'unseen' (test) or 'all'."""
    available = sorted(int(p.name[9:].split("-")[0]) for p in layouts_dir().glob("FloorPlan*-openable.json"))
    if kind == "all":
        return available
    if kind not in ("seen", "unseen"):
        raise ValueError(f"rooms must be 'seen', 'unseen' or 'all', got {kind!r}")
    return [n for n in available if (n in UNSEEN_ROOMS) == (kind == "unseen")]


def scene_of(n: int) -> str:
    return next(k for k, r in SCENES.items() if n in r)


@dataclass
class Receptacle:
    pddl_id: str
    rtype: str
    location: str


@dataclass
class GameSpec:
    floorplan: int
    task_type: str
    params: dict
    receptacles: list[Receptacle]
    objects: list[tuple[str, str, int]]        # (pddl id, object type, index into receptacles)
    goal_text: str
    problem_name: str = ""
    meta: dict = field(default_factory=dict)

    def signature(self) -> str:
        """Identity of the game's content (room, task, what is where), ignoring random object ids."""
        placements = sorted((ot, self.receptacles[r].pddl_id) for _, ot, r in self.objects)
        payload = [self.floorplan, self.task_type, sorted(self.params.items()),
                   sorted(r.pddl_id for r in self.receptacles), placements]
        return hashlib.sha256(json.dumps(payload).encode()).hexdigest()[:12]

    @property
    def game_id(self) -> str:
        return f"FloorPlan{self.floorplan}-{self.task_type}-{self.signature()}"


def _room(n: int) -> tuple[list[str], dict]:
    d = layouts_dir()
    obj_types = json.loads((d / f"FloorPlan{n}-objects.json").read_text())
    poses = json.loads((d / f"FloorPlan{n}-openable.json").read_text())
    return obj_types, poses


def _recep_type(rid: str) -> str:
    parts = rid.split("|")
    return parts[-1] if len(parts) > 4 else parts[0]


def _room_receptacles(n: int, rng: random.Random) -> tuple[list[Receptacle], list[str]]:
    C = _constants()
    obj_types, poses = _room(n)
    receps = []
    for i, (rid, (x, z, rot, hor)) in enumerate(sorted(poses.items())):
        # each receptacle gets its own location: receptacles sharing a navigation point would merge
        loc = mangle("loc|%d|%d|%d|%d" % (int(x / 0.25), int(z / 0.25), int(rot / 90) % 4, int(hor))) + f"_{i}"
        receps.append(Receptacle(mangle(rid), _recep_type(rid), loc))
    # receptacle types listed only in objects.json (garbage cans, stove burners, towel holders...)
    present = {r.rtype for r in receps}
    extra = sorted(t for t in set(obj_types) if t in C.RECEPTACLES and t not in C.MOVABLE_RECEPTACLES_SET
                   and t not in present)
    for j, t in enumerate(extra):
        coords = "|".join("%+06.2f" % rng.uniform(-3, 3) for _ in range(3))
        receps.append(Receptacle(mangle(f"{t}|{coords}"), t, f"loc_bar_{j + 1}_bar_{j + 1}_bar_0_bar_30_x{j}"))
    return receps, obj_types


def plan_game(n: int, task_type: str, rng: random.Random, max_receptacles: int = 12) -> GameSpec | None:
    """Plan one game in room n, or None when the room cannot host this task type."""
    C = _constants()
    all_receps, obj_types = _room_receptacles(n, rng)
    pickupable = set().union(*C.VAL_RECEPTACLE_OBJECTS.values()) - SLICED

    def can_hold(rtype: str, otype: str) -> bool:
        return otype in C.VAL_RECEPTACLE_OBJECTS.get(rtype, ())

    rtypes = sorted({r.rtype for r in all_receps})
    cand = sorted(t for t in set(obj_types) if t in pickupable and any(can_hold(rt, t) for rt in rtypes))
    lamps = sorted(t for t in set(obj_types) if t in LAMPS)
    params = {"object_target": "", "parent_target": "", "toggle_target": "", "mrecep_target": "",
              "object_sliced": False}
    required: list[str] = []          # receptacle types the game must keep
    if task_type == "look_at_obj_in_light":
        hosts = [rt for rt in rtypes if rt in LAMP_HOSTS]
        if not lamps or not cand or not hosts:
            return None
        params["toggle_target"] = rng.choice(lamps)
        params["object_target"] = rng.choice(cand)
        required.append(rng.choice(hosts))
    else:
        exclude = set()
        pool = cand
        if task_type in TOOLS:
            prop, tools = TOOLS[task_type]
            tools_here = [t for t in tools if t in rtypes]
            if not tools_here:
                return None
            required.append(rng.choice(tools_here))
            pool = [t for t in cand if t in C.VAL_ACTION_OBJECTS[prop]]
            exclude = TOOL_TYPES
        pool = [t for t in pool if any(can_hold(rt, t) for rt in rtypes if rt not in exclude)]
        if not pool:
            return None
        target = rng.choice(pool)
        parents = [rt for rt in rtypes if can_hold(rt, target) and rt not in exclude]
        params["object_target"] = target
        params["parent_target"] = rng.choice(parents)
        required.append(params["parent_target"])
        # the target must start somewhere that is not its goal receptacle
        if not [rt for rt in rtypes if can_hold(rt, target) and rt != params["parent_target"]]:
            return None
        required.append(rng.choice([rt for rt in rtypes if can_hold(rt, target) and rt != params["parent_target"]]))

    # keep one receptacle of each required type, then fill up to max_receptacles at random
    by_type = defaultdict(list)
    for r in all_receps:
        by_type[r.rtype].append(r)
    keep = []
    for rt in dict.fromkeys(required):
        keep.append(rng.choice(by_type[rt]))
    rest = [r for r in all_receps if r not in keep]
    rng.shuffle(rest)
    keep += rest[: max(0, max_receptacles - len(keep))]
    receps = sorted(keep, key=lambda r: r.pddl_id)

    target = params["object_target"]
    objects: list[tuple[str, str, int]] = []

    def coords() -> str:
        return "|".join("%+06.2f" % rng.uniform(-3, 3) for _ in range(3))

    for ot in cand + lamps:
        if ot in LAMPS:
            if ot != params["toggle_target"] and rng.random() < 0.5:
                continue
            hosts = [i for i, r in enumerate(receps) if r.rtype in LAMP_HOSTS]
            if ot == params["toggle_target"]:
                hosts = [i for i in hosts if receps[i].rtype == required[0]] or hosts
            count = 1
        else:
            hosts = [i for i, r in enumerate(receps) if can_hold(r.rtype, ot)]
            if ot == target and params["parent_target"]:
                hosts = [i for i in hosts if receps[i].rtype != params["parent_target"]]
                if task_type in TOOLS:
                    hosts = [i for i in hosts if receps[i].rtype not in TOOL_TYPES] or hosts
            if ot != target and rng.random() < 0.5:
                continue          # sparse distractors keep rooms readable and the engine fast
            count = rng.randint(2, 3) if (task_type == "pick_two_obj_and_place" and ot == target) else rng.randint(1, 2)
        if not hosts:
            if ot in (target, params["toggle_target"]):
                return None
            continue
        for _ in range(count):
            objects.append((mangle(f"{ot}|{coords()}"), ot, rng.choice(hosts)))
    if not any(ot == target for _, ot, _ in objects):
        return None
    if params["toggle_target"] and not any(ot == params["toggle_target"] for _, ot, _ in objects):
        return None

    import alfworld.gen.goal_library as glib
    template = rng.choice(glib.gdict[task_type]["templates"])
    goal_text = template.format(obj=target.lower(), recep=params["parent_target"].lower(),
                                toggle=params["toggle_target"].lower(), mrecep="")
    return GameSpec(floorplan=n, task_type=task_type, params=params, receptacles=receps, objects=objects,
                    goal_text=goal_text, problem_name=f"plan_gen_{rng.randint(0, 10**9)}",
                    meta={"scene": scene_of(n)})


def render_problem(spec: GameSpec) -> str:
    C = _constants()
    L = [f"(define (problem {spec.problem_name})", "(:domain alfred)", "(:objects", "    agent1 - agent"]
    all_ot = sorted(set(C.OBJECTS) - set(C.RECEPTACLES) | C.MOVABLE_RECEPTACLES_SET | {"Knife", "ButterKnife"})
    all_rt = sorted(set(C.RECEPTACLES) - C.MOVABLE_RECEPTACLES_SET)
    L += [f"    {t}Type - otype" for t in all_ot]
    L += [f"    {t}Type - rtype" for t in all_rt]
    L += [f"    {o} - object" for o, _, _ in spec.objects]
    L += [f"    {r.pddl_id} - receptacle" for r in spec.receptacles]
    L += [f"    {loc} - location" for loc in sorted({r.location for r in spec.receptacles} | {START})]
    L += [")", "(:init", f"    (atLocation agent1 {START})"]
    for r in spec.receptacles:
        L.append(f"    (receptacleType {r.pddl_id} {r.rtype}Type)")
        L.append(f"    (receptacleAtLocation {r.pddl_id} {r.location})")
        if r.rtype in C.OPENABLE_CLASS_SET:
            L.append(f"    (openable {r.pddl_id})")
    for o, ot, ri in spec.objects:
        r = spec.receptacles[ri]
        L += [f"    (objectType {o} {ot}Type)", f"    (inReceptacle {o} {r.pddl_id})",
              f"    (objectAtLocation {o} {r.location})"]
        if ot in LAMPS:
            L.append(f"    (toggleable {o})")
            continue
        L.append(f"    (pickupable {o})")
        for prop, pred in (("Cleanable", "cleanable"), ("Heatable", "heatable"), ("Coolable", "coolable"),
                           ("Sliceable", "sliceable")):
            if ot in C.VAL_ACTION_OBJECTS[prop]:
                L.append(f"    ({pred} {o})")
        if ot in C.MOVABLE_RECEPTACLES_SET:
            L.append(f"    (isReceptacleObject {o})")
    otypes = sorted({ot for _, ot, _ in spec.objects})
    for rt in sorted({r.rtype for r in spec.receptacles}):
        for ot in otypes:
            if ot in C.VAL_RECEPTACLE_OBJECTS.get(rt, ()):
                L.append(f"    (canContain {rt}Type {ot}Type)")
    L.append(")")
    import alfworld.gen.goal_library as glib
    p = spec.params
    goal = glib.gdict[spec.task_type]["pddl"].replace("#", "-").format(
        obj=p["object_target"], recep=p["parent_target"], toggle=p["toggle_target"], mrecep=p["mrecep_target"])
    L.append(goal.strip())
    return "\n".join(L) + "\n"


def render_game(spec: GameSpec, walkthrough: list[str] | None = None) -> tuple[dict, dict]:
    """(game.tw-pddl content, traj_data.json content) in the engine's format."""
    ensure_alfworld_data()
    from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH
    grammar = Path(ALFRED_TWL2_PATH).read_text().replace("UNKNOWN GOAL", spec.goal_text)
    game = {"pddl_domain": Path(ALFRED_PDDL_PATH).read_text(), "grammar": grammar,
            "pddl_problem": render_problem(spec), "solvable": True, "walkthrough": walkthrough}
    traj = {"task_type": spec.task_type, "task_id": spec.game_id, "scene": {"floor_plan": f"FloorPlan{spec.floorplan}",
            "scene_type": spec.meta.get("scene")}, "pddl_params": dict(spec.params),
            "turk_annotations": {"anns": [{"task_desc": spec.goal_text}]}, "generator": "autorl_tui.alfworld"}
    return game, traj


def write_game(spec: GameSpec, folder: Path, walkthrough: list[str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    game, traj = render_game(spec, walkthrough)
    (folder / "game.tw-pddl").write_text(json.dumps(game))
    (folder / "traj_data.json").write_text(json.dumps(traj, indent=1))
    return folder / "game.tw-pddl"


@dataclass
class ExpertTrajectory:
    """The planner's walkthrough replayed in the engine: what the expert saw and did each step."""
    intro: str
    steps: list[dict]          # {"admissible", "action", "feedback", "raw_feedback" (the engine's text as given)}
    won: bool
    search_steps: list[dict] | None = None   # the searching expert, when it could be made
    raw_intro: str = ""        # the engine's intro as given (AutoRL-Bench's protocol shows it raw)

    @property
    def actions(self) -> list[str]:
        return [s["action"] for s in self.steps]


def validate_game(gamefile: str | Path, max_walkthrough: int = 40, spec: GameSpec | None = None,
                  search_seed: str | None = None) -> ExpertTrajectory:
    """Load the game in the real engine and replay the planner's walkthrough (raises when it cannot load).

    With `spec`, also record a *searching* expert (`ExpertTrajectory.search_steps`): before each
    trip to fetch the target, it visits 0-3 other receptacles that could hold the target but do
    not (opening closed ones), as a player who does not know where things are would."""
    game = AlfworldGame(str(gamefile), walkthrough_wanted=True)
    try:
        obs = game.reset()
        walkthrough = list(game.walkthrough or [])[:max_walkthrough]
        intro, raw_intro, steps, won = obs.text, game.raw_feedback, [], obs.won
        for action in walkthrough:
            if action not in obs.admissible:
                break
            admissible = obs.admissible
            obs = game.step(action)
            steps.append({"admissible": admissible, "action": action, "feedback": obs.text,
                          "raw_feedback": game.raw_feedback})
            if obs.won:
                won = True
                break
        expert = ExpertTrajectory(intro=intro, steps=steps, won=won, raw_intro=raw_intro)
        if won and spec is not None:
            try:
                expert.search_steps = _searching_expert(game, spec, walkthrough,
                                                        random.Random(search_seed or spec.signature()))
            except Exception:     # the planner's expert is enough; the searching one is a bonus
                expert.search_steps = None
        return expert
    finally:
        game.close()


def _searching_expert(game: AlfworldGame, spec: GameSpec, walkthrough: list[str], rng: random.Random):
    C = _constants()
    obs = game.reset()
    names = game.entity_names()
    target = spec.params["object_target"]
    holding = {ri for _, ot, ri in spec.objects if ot == target}
    decoys = [names[r.pddl_id.lower()] for i, r in enumerate(spec.receptacles)
              if r.pddl_id.lower() in names and i not in holding and target in C.VAL_RECEPTACLE_OBJECTS.get(r.rtype, ())
              and r.rtype != spec.params["parent_target"] and r.rtype not in TOOL_TYPES]
    rng.shuffle(decoys)
    queue: list[tuple[str, bool]] = []        # (command, a search visit?)
    for i, action in enumerate(walkthrough):
        nxt = [a for a in walkthrough[i + 1:i + 3] if not a.startswith("open ")]
        if action.startswith("go to ") and nxt and nxt[0].startswith(f"take {target.lower()} "):
            k = rng.randint(0, min(3, len(decoys)))
            queue += [(f"go to {d}", True) for d in decoys[:k]]
            decoys = decoys[k:]
        queue.append((action, False))
    steps, opened = [], set()
    while queue and len(steps) < 60:
        action, searching = queue.pop(0)
        if action not in obs.admissible:
            if action.startswith("open ") and action[5:] in opened:
                continue          # we opened it while searching
            return None
        admissible = obs.admissible
        obs = game.step(action)
        steps.append({"admissible": admissible, "action": action, "feedback": obs.text})
        if obs.won:
            return steps
        where = action[6:]
        if searching and "is closed" in obs.text and f"open {where}" in obs.admissible:
            queue.insert(0, (f"open {where}", False))
            opened.add(where)
    return None


def candidates(task_type: str, seed: int, room_kind: str, max_receptacles: int) -> Iterator[GameSpec]:
    """An endless, deterministic stream of planned games of one type."""
    pool = [n for n in rooms(room_kind) if scene_of(n) in ROOMS_FOR_TASK[task_type]]
    k = 0
    while True:
        rng = random.Random(f"{seed}/{task_type}/{k}")
        k += 1
        spec = plan_game(rng.choice(pool), task_type, rng, max_receptacles)
        if spec is not None:
            spec.meta["candidate"] = k - 1
            yield spec


def build_games(out_dir: Path, *, seed: int, n_per_type: int, rooms_kind: str = "seen", max_receptacles: int = 12,
                task_types: tuple[str, ...] = TASK_TYPES, exclude: set[str] | None = None,
                max_candidates: int = 200, log: Callable[[str], None] = lambda s: None) -> list[dict]:
    """Validate candidates until n_per_type games of each type are won by their walkthrough.

    Writes out_dir/games/<task_type>/<game_id>/{game.tw-pddl, traj_data.json, expert.json} and
    returns the items (id, gamefile relative to out_dir, task_type, ...)."""
    exclude = set(exclude or ())
    items = []
    for task_type in task_types:
        made, tried = 0, 0
        seen: set[str] = set()
        for spec in candidates(task_type, seed, rooms_kind, max_receptacles):
            if made >= n_per_type:
                break
            tried += 1
            if tried > max_candidates:
                raise RuntimeError(f"only {made} of {n_per_type} {task_type} games after {max_candidates} candidates")
            sig = spec.signature()
            if sig in exclude or sig in seen:
                continue
            seen.add(sig)
            folder = out_dir / "games" / task_type / spec.game_id
            gamefile = write_game(spec, folder)
            try:
                expert = validate_game(gamefile, spec=spec)
            except Exception as exc:   # an inconsistent problem fails at load (KeyError): drop it
                log(f"drop {spec.game_id}: {type(exc).__name__}: {exc}")
                _remove(folder)
                continue
            if not expert.won:
                log(f"drop {spec.game_id}: walkthrough does not win")
                _remove(folder)
                continue
            write_game(spec, folder, walkthrough=expert.actions)   # later loads need no planning
            (folder / "expert.json").write_text(json.dumps(
                {"intro": expert.intro, "steps": expert.steps, "won": expert.won,
                 "search_steps": expert.search_steps}))
            items.append({"id": spec.game_id, "gamefile": os.path.relpath(gamefile, out_dir), "task_type": task_type,
                          "floorplan": spec.floorplan, "scene": spec.meta.get("scene"), "goal": spec.goal_text,
                          "signature": sig, "expert_actions": expert.actions,
                          "n_receptacles": len(spec.receptacles), "n_objects": len(spec.objects)})
            made += 1
            log(f"{task_type}: {made}/{n_per_type} ({spec.game_id}, {len(expert.actions)} expert steps)")
    return items


def planned_signatures(*, seed: int, rooms_kind: str, max_receptacles: int, n_candidates: int,
                       task_types: tuple[str, ...] = TASK_TYPES) -> set[str]:
    """Signatures of the first n_candidates planned games per type (no engine): what a split may use."""
    sigs = set()
    for tt in task_types:
        stream = candidates(tt, seed, rooms_kind, max_receptacles)
        for _ in range(n_candidates):
            sigs.add(next(stream).signature())
    return sigs


def _remove(folder: Path) -> None:
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()
