"""AutoRL-Bench's ids as this harness knows them (docs/autorl-bench.md): its task ids, the agent stacks its
folders name, and its agent contract's variables. Agent folders are read by catalog/autorl_bench_agents.py."""

from __future__ import annotations

from autorl_tui.exitcodes import UsageError

START_DEFAULT = "start.sh"
CONFIG = "config.yaml"

# Its task ids → our task cards (None: not in this harness yet).
TASK_ALIASES: dict[str, str | None] = {"gsm8k": "gsm8k", "humaneval": "humaneval", "alpacaeval": "alpacaeval",
                                       "alfworld": "alfworld", "webshop": "webshop", "deepsearchqa": "deepsearchqa"}

# A stack named in config.yaml (`stack:`, else a word of the folder id or `name`) → our stream
# parser and the built-in spec whose key variables it needs.
STACKS = {"claude": ("claude_stream_json", "claude-code"), "codex": ("codex_json", "codex"),
          "gemini": ("gemini_stream_json", "gemini-cli"), "opencode": ("opencode_json", "opencode"),
          "openhands": ("openhands", "openhands")}

# The contract's own variables: config.yaml cannot set them (AutoRL-Bench's run.py sets them last too).
RESERVED_ENV = {"TASK", "BASE_MODEL", "WORKSPACE", "MODEL_PATH", "DATA_PATH", "OUTPUT_DIR", "GRADING_SERVER_URL",
                "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "PATH", "HOME", "METRICS_FILE", "RUN_DEADLINE", "RUN_SEED"}


def task_alias(task_id: str) -> str | None:
    """Our card id for an AutoRL-Bench task id; UsageError for one this harness lacks; None when
    the id is not one of its ids."""
    if task_id not in TASK_ALIASES:
        return None
    ours = TASK_ALIASES[task_id]
    if ours is None:
        have = ", ".join(k for k, v in TASK_ALIASES.items() if v)
        raise UsageError(f"AutoRL-Bench task {task_id!r} is not available in this harness yet; its tasks that are: "
                         f"{have} (see docs/autorl-bench.md)")
    return ours
