"""The prompt every LLM agent gets: one versioned template (`builtin/prompts/agent_prompt_v1.md.j2`)
filled with the task description and our workspace instructions. The engine writes the text to
the workspace as `prompt.md` and records the version with the run; the version names the
template and a hash of its text, so an edited template never passes for the old one."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import jinja2

PROMPT_TEMPLATE = "agent_prompt_v1"
PROMPTS_DIR = Path(__file__).resolve().parents[1] / "builtin" / "prompts"


def _human(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    parts = [f"{h} h" if h else "", f"{m} min" if m else "", f"{s} s" if s and not h else ""]
    return " ".join(p for p in parts if p) or "0 s"


def build_agent_prompt(description: str, instructions: str, budget_s: float, *,
                       task_name: str | None = None, workspace: str = ".",
                       deadline: float | None = None,
                       template: str = PROMPT_TEMPLATE) -> tuple[str, str]:
    """Returns (prompt text, version), e.g. (…, "agent_prompt_v1@3f2a9c1e")."""
    if not description or not description.strip():
        raise ValueError("the task description is empty: the agent would not know what to do")
    if budget_s <= 0:
        raise ValueError(f"budget must be positive seconds, got {budget_s!r}")
    path = PROMPTS_DIR / f"{template}.md.j2"
    if not path.is_file():
        known = sorted(p.name.removesuffix(".md.j2") for p in PROMPTS_DIR.glob("*.md.j2"))
        raise ValueError(f"no prompt template {template!r}; known: {', '.join(known)}")
    source = path.read_text()
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             autoescape=False)
    deadline_iso = (dt.datetime.fromtimestamp(deadline, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
                    if deadline else None)
    text = env.from_string(source).render(
        description=description, instructions=instructions or "", budget_human=_human(budget_s),
        task_name=task_name, workspace=workspace, deadline_iso=deadline_iso)
    version = f"{template}@{hashlib.sha256(source.encode()).hexdigest()[:8]}"
    return text, version
