"""ALFWorld under AutoRL-Bench's protocol: the ReAct agent of its evaluator
(rdagent/scenarios/rl/autorl_bench/benchmarks/alfworld/eval.py, after ReAct's alfworld notebook).

- the prompt: "Interact with a household to solve a task. Here are two examples.\\n", the two
  worked examples of the game's task type (`react_<key>_1` then `react_<key>_0`) read at run time
  from the user's copy of the prompt file AutoRL-Bench uses (react_prompts.json, ReAct's
  alfworld_3prompts.json; never shipped with this project), "\\nHere is the task.\\n", the game's
  intro without its first paragraph, "\\n>", then the FULL history, each step " <action>\\n<obs>\\n>";
- the model completes that text (prompt_format plain, stop at a newline, 100 tokens); its reply,
  stripped, is sent to the engine verbatim: no list of commands, no matching;
- an observation loses a leading "You arrive at loc N. "; a `think:` action is answered "OK.";
- 50 steps; won when the engine says so.

Standalone (relative imports only): copied into the agent's workspace with api.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .game import AlfworldGame, Observation
from .episodes import Parsed

PROMPTS_ENV = "ALFWORLD_REACT_PROMPTS"
PROMPTS_FILE = "react_prompts.json"
HEADER = "Interact with a household to solve a task. Here are two examples.\n"
TASK_HEADER = "\nHere is the task.\n"
# game folder prefix -> the prompt file's key, in AutoRL-Bench's order (the first prefix that fits wins)
TASK_PREFIXES = (("pick_and_place", "put"), ("pick_clean_then_place", "clean"), ("pick_heat_then_place", "heat"),
                 ("pick_cool_then_place", "cool"), ("look_at_obj", "examine"), ("pick_two_obj", "puttwo"))


class ReactPromptsError(ValueError):
    pass


def prompts_path(option: str | None = None, split_path: str | os.PathLike | None = None) -> Path:
    """The prompt file: the `react_prompts` option, else $ALFWORLD_REACT_PROMPTS, else the copy in
    the split's folder (placed there from `<home>/data/alfworld/`, where `autorl-tui data get
    alfworld` fetches it), else react_prompts.json in $ALFWORLD_DATA."""
    raw = option or os.environ.get(PROMPTS_ENV)
    if not raw and split_path is not None and (Path(split_path) / PROMPTS_FILE).is_file():
        raw = str(Path(split_path) / PROMPTS_FILE)
    if not raw and os.environ.get("ALFWORLD_DATA"):
        raw = str(Path(os.environ["ALFWORLD_DATA"]) / PROMPTS_FILE)
    if not raw:
        raise ReactPromptsError(f"AutoRL-Bench's ALFWorld prompt file is not set: run `autorl-tui data get alfworld`, "
                                f"or set {PROMPTS_ENV} (or scorer_options.react_prompts) to react_prompts.json")
    return Path(raw).expanduser()


def load_prompts(option: str | None = None, split_path: str | os.PathLike | None = None) -> dict:
    path = prompts_path(option, split_path)
    try:
        prompts = json.loads(path.read_text())
    except FileNotFoundError:
        raise ReactPromptsError(f"{path} does not exist: run `autorl-tui data get alfworld`, or point {PROMPTS_ENV} "
                                "at AutoRL-Bench's react_prompts.json") from None
    except (OSError, ValueError) as exc:
        raise ReactPromptsError(f"{path} is not a JSON prompt file ({exc}): use AutoRL-Bench's react_prompts.json") from None
    missing = [f"react_{key}_{i}" for _, key in TASK_PREFIXES for i in (0, 1)
               if not isinstance(prompts.get(f"react_{key}_{i}") if isinstance(prompts, dict) else None, str)]
    if missing:
        raise ReactPromptsError(f"{path} lacks the worked examples {', '.join(missing[:3])}"
                                f"{' ...' if len(missing) > 3 else ''}: use AutoRL-Bench's react_prompts.json")
    return prompts


def game_name(gamefile: str) -> str:
    """As AutoRL-Bench names a game: its task folder and trial folder ("pick_and_place_simple-.../trial_...")."""
    return "/".join(str(gamefile).split("/")[-3:-1])


def prompt_key(name: str, task_type: str = "") -> str | None:
    for prefix, key in TASK_PREFIXES:
        if name.startswith(prefix) or task_type.startswith(prefix):
            return key
    return None


def prompt_prefix(prompts: dict, key: str) -> str:
    return HEADER + prompts[f"react_{key}_1"] + prompts[f"react_{key}_0"] + TASK_HEADER


# A first thought naming the plan, in the worked examples' manner (our own wording), by prompt key.
PLANS = {
    "put": "find and take a {o}, then put it in/on {r}",
    "clean": "find and take a {o}, then clean it with sinkbasin, then put it in/on {r}",
    "heat": "find and take a {o}, then heat it with microwave, then put it in/on {r}",
    "cool": "find and take a {o}, then cool it with fridge, then put it in/on {r}",
    "examine": "find and take a {o}, then find and use a {t}",
    "puttwo": "find and take the first {o}, then put it in/on {r}, then find and take the second {o}, "
              "then put it in/on {r}",
}


def plan_thought(key: str, pddl_params: dict) -> str | None:
    """`think: To solve the task, I need to ...` from a game's traj_data `pddl_params`, or None
    when they do not name what the plan needs."""
    names = {k: str(pddl_params.get(f"{k}_target") or "").lower() for k in ("object", "parent", "toggle")}
    plan = PLANS.get(key)
    if plan is None or not names["object"] or ("{r}" in plan and not names["parent"]) or \
            ("{t}" in plan and not names["toggle"]):
        return None
    return "think: To solve the task, I need to " + plan.format(o=names["object"], r=names["parent"],
                                                               t=names["toggle"]) + "."


def process_ob(ob: str) -> str:
    if ob.startswith("You arrive at loc "):
        ob = ob[ob.find(". ") + 2:]
    return ob


def intro_of(feedback: str) -> str:
    """The intro as AutoRL-Bench shows it: the engine's text without its first paragraph (the banner)."""
    return "\n".join(feedback.split("\n\n")[1:])


def build_prompt(prefix: str, intro: str, history) -> str:
    return prefix + intro + "\n>" + "".join(f" {action}\n{obs}\n>" for action, obs in history)


def parse(reply: str, obs=None) -> Parsed:
    """The reply up to its first newline (the stop), stripped: the command, verbatim."""
    text = (reply or "").split("\n", 1)[0].strip()
    return Parsed(action=text, exact=True, text=text)


class ReactGame:
    """An AlfworldGame seen as AutoRL-Bench's loop sees it (raw engine text, the rules above)."""

    def __init__(self, gamefile: str):
        self.game = AlfworldGame(gamefile)
        self.task_type = self.game.task_type

    def reset(self) -> Observation:
        obs = self.game.reset()
        return Observation(intro_of(self.game.raw_feedback), obs.admissible, obs.won, 0)

    def step(self, action: str) -> Observation:
        obs = self.game.step(action)
        text = "OK." if action.startswith("think:") else process_ob(self.game.raw_feedback)
        return Observation(text, obs.admissible, obs.won, obs.moves)

    def close(self) -> None:
        self.game.close()
