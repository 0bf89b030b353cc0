"""A thin wrapper over the real ALFWorld text engine (TextWorld's PDDL env + alfworld's wrappers).

Standalone on purpose (standard library + alfworld/textworld only): this file is copied verbatim
into the agent's workspace, so the agent's rollouts and the grader's run the same code.

Engine quirks handled here:
- importing `alfworld` creates `~/.cache/alfworld` unless `ALFWORLD_DATA` is set: we set it to a
  folder of ours first (`ensure_alfworld_data`);
- Fast Downward overwrites `sys.argv` when a game is loaded or reset: we restore it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path



def ensure_alfworld_data(path: str | os.PathLike | None = None) -> str:
    """Point ALFWORLD_DATA at a folder of ours (unless already set) before alfworld is imported."""
    if path is not None:
        os.environ["ALFWORLD_DATA"] = str(path)
    elif not os.environ.get("ALFWORLD_DATA"):
        os.environ["ALFWORLD_DATA"] = os.path.join(tempfile.gettempdir(), f"autorl-alfworld-{os.getuid()}")
    os.makedirs(os.environ["ALFWORLD_DATA"], exist_ok=True)
    return os.environ["ALFWORLD_DATA"]


@contextlib.contextmanager
def _keep_argv():
    saved = list(sys.argv)
    try:
        yield
    finally:
        sys.argv[:] = saved


def _memoize_parser(module) -> None:
    """TextWorld re-parses the same grammar snippets (command templates, conditions) with TatSu on
    every step; that parsing is most of the engine's time. Parsing is pure, so cache it (and hand
    out deep copies, since callers attach context to the parsed symbols)."""
    original = module._parse_and_convert
    if getattr(original, "_autorl_memoized", False):
        return
    cache: dict = {}

    def parse(*args, **kwargs):
        if len(args) != 1 or set(kwargs) - {"rule_name", "trace"} or kwargs.get("trace"):
            return original(*args, **kwargs)
        key = (args[0], kwargs.get("rule_name"))
        if key not in cache:
            if len(cache) > 50_000:
                cache.clear()
            cache[key] = original(args[0], rule_name=kwargs.get("rule_name"))
        return copy.deepcopy(cache[key])

    parse._autorl_memoized = True
    module._parse_and_convert = parse


def _memoize_translator(fast_downward) -> None:
    """Loading or resetting a game translates its PDDL to SAS twice (plain and optimized) with
    Fast Downward's Python translator, the bulk of a reset. The translation is a pure function of
    (domain, problem); cache the last few so replaying a game (load + reset, repeated rollouts)
    translates once. Deep copies keep the engine's objects private to each game."""
    original = fast_downward.pddl2sas
    if getattr(original, "_autorl_memoized", False):
        return
    cache: dict = {}

    def pddl2sas(domain, problem, verbose=False, optimize=False):
        if verbose:
            return original(domain, problem, verbose=verbose, optimize=optimize)
        key = (hash(domain), domain, problem, bool(optimize))
        if key not in cache:
            if len(cache) >= 64:
                cache.pop(next(iter(cache)))
            cache[key] = original(domain, problem, verbose=False, optimize=optimize)
        task, sas = cache[key]
        return copy.deepcopy(task), sas

    pddl2sas._autorl_memoized = True
    fast_downward.pddl2sas = pddl2sas


def _engine_classes():
    ensure_alfworld_data()
    with _keep_argv():
        import textworld
        import textworld.logic
        import textworld.envs.pddl.textgen
        from textworld.envs import PddlEnv
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    # Read here, not through autorl_tui.settings: this module is copied into agents' workspaces
    # (alfworld_api), where nothing of autorl_tui may be imported. Same values as settings' switch.
    if os.environ.get("AUTORL_ALFWORLD_NO_PARSE_CACHE", "").strip().lower() not in ("1", "true", "yes", "on"):
        _memoize_parser(textworld.envs.pddl.textgen)
        _memoize_parser(textworld.logic)
        import fast_downward
        _memoize_translator(fast_downward)
    return textworld, PddlEnv, AlfredDemangler, AlfredInfos


@dataclass
class Observation:
    text: str                      # what the engine said (the intro at reset, the feedback after a step)
    admissible: list[str]          # commands the engine accepts now
    won: bool = False
    moves: int = 0

    @property
    def reward(self) -> float:
        return 1.0 if self.won else 0.0

    @property
    def done(self) -> bool:
        return self.won


@dataclass
class AlfworldGame:
    """One game file, playable repeatedly: `reset()` then `step(command)` until `won`."""
    gamefile: str
    walkthrough_wanted: bool = False
    _env: object = field(default=None, repr=False)
    walkthrough: list[str] | None = None
    task: str = ""
    task_type: str = ""
    moves: int = 0
    raw_feedback: str = ""         # the engine's text as it gave it (AutoRL-Bench's protocol reads it raw)

    def __post_init__(self):
        self.gamefile = str(self.gamefile)
        if not os.path.exists(self.gamefile):
            raise FileNotFoundError(f"ALFWorld game file {self.gamefile} does not exist")
        traj = Path(self.gamefile).with_name("traj_data.json")
        if traj.exists():
            self.task_type = json.loads(traj.read_text()).get("task_type", "")

    def _load(self):
        textworld, PddlEnv, AlfredDemangler, AlfredInfos = _engine_classes()
        extras = ["gamefile"] + (["walkthrough"] if self.walkthrough_wanted else [])
        infos = textworld.EnvInfos(won=True, admissible_commands=True, feedback=True, moves=True, extras=extras)
        env = AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False))
        with _keep_argv():
            env.load(self.gamefile)
        self._env = env

    def reset(self) -> Observation:
        if self._env is None:
            self._load()
        with _keep_argv():
            state = self._env.reset()
        if self.walkthrough_wanted:
            self.walkthrough = list(state.get("extra.walkthrough") or [])
        text = self.raw_feedback = state.feedback or ""
        self.task = text.split("Your task is to:", 1)[-1].strip() if "Your task is to:" in text else ""
        self.moves = 0
        return Observation(clean_feedback(text), list(state["admissible_commands"]), bool(state["won"]), 0)

    def step(self, command: str) -> Observation:
        if self._env is None:
            raise RuntimeError("call reset() before step()")
        with _keep_argv():
            state, _, _ = self._env.step(command)
        self.moves += 1
        self.raw_feedback = state.feedback or ""
        return Observation(clean_feedback(self.raw_feedback), list(state["admissible_commands"]),
                           bool(state["won"]), self.moves)

    def entity_names(self) -> dict[str, str]:
        """Lower-cased PDDL ids -> the names the player sees ("countertop_bar_..." -> "countertop 1")."""
        if self._env is None:
            raise RuntimeError("call reset() first")
        return {k.lower(): info.name.strip() for k, info in self._env._entity_infos.items()}

    def close(self):
        if self._env is not None:
            with contextlib.suppress(Exception):
                self._env.close()
            self._env = None


def clean_feedback(text: str) -> str:
    """Drop TextWorld's banner from the intro; keep the room and the task."""
    text = text.replace("-= Welcome to TextWorld, ALFRED! =-", "")
    return "\n".join(line.rstrip() for line in text.strip().splitlines()).strip()
