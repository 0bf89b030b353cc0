"""What an AutoRL-Bench agent folder's start script really needs (docs/autorl-bench.md): the
agent CLIs it calls, the variables it reads, and the checkouts outside the folder it `cd`s into.

AutoRL-Bench runs `bash start.sh` with the operator's whole environment, so its folders rely on
whatever the operator's shell holds: a CLI on PATH, `OPENHANDS_RL_ROOT` naming an external
pipeline checkout, `OPENAI_API_BASE`. Readiness (`autorl-tui agents`) and plan validation read the
script instead of trusting the folder's `needs: [bash]`, so a missing piece is named before
anything is prepared. A plain reading of the text, never executed: a command word at the start of
a command (after `exec`, `timeout N`, `nohup`, `VAR=value`), `$NAME` / `${NAME...}` expansions,
and `cd TARGET` lines whose target is a variable or an absolute path."""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from typing import Mapping

from autorl_tui.catalog.autorl_bench import RESERVED_ENV

# Agent command lines its folders call.
AGENT_CLIS = ("claude", "codex", "gemini", "opencode", "openhands")
_WRAPPERS = {"exec", "nohup", "time", "command", "env"}
_SEPARATORS = re.compile(r"&&|\|\||[;|&(]")
_EXPANSION = re.compile(r"(?<!\\)\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-=+?])?|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))")
_ASSIGN = re.compile(r"^\s*(?:export\s+|local\s+|readonly\s+)?([A-Za-z_][A-Za-z0-9_]*)=")
_CD = re.compile(r"(?:^|[;&|]\s*)cd\s+(?P<target>\"[^\"]*\"|'[^']*'|[^\s;&|)]+)")
# set by bash itself or by the script's own environment in every shell
_SHELL_VARS = {"PWD", "OLDPWD", "RANDOM", "SECONDS", "LINENO", "BASH_SOURCE", "BASHPID", "UID", "EUID", "USER",
               "SHELL", "IFS", "PPID", "HOSTNAME", "TERM", "LANG", "PYTHONUNBUFFERED"}


@dataclass
class ScriptNeeds:
    clis: list[str] = field(default_factory=list)          # agent CLIs called
    reads: list[str] = field(default_factory=list)         # variables read with no default in the script
    optional: list[str] = field(default_factory=list)      # variables read with a default (`${X:-...}`)
    checkouts: list[str] = field(default_factory=list)     # `cd` targets outside the folder, as written

    def to_dict(self) -> dict:
        return {"clis": self.clis, "reads": self.reads, "optional": self.optional, "checkouts": self.checkouts}


def _code_lines(text: str):
    for raw in text.replace("\\\n", " ").splitlines():       # a `\`-continued command is one line
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        yield line


def _commands(line: str):
    """The first word of each command on a line (quoted heredoc bodies and strings are rarely
    commands: only words outside quotes at a command's start count)."""
    for part in _SEPARATORS.split(line):
        try:
            words = shlex.split(part, comments=True)
        except ValueError:
            words = [w.strip("\"'") for w in part.split()]
        while words and (words[0] in _WRAPPERS or "=" in words[0] and not words[0].startswith("=")):
            words = words[1:]
        if words and words[0] == "timeout":
            words = [w for w in words[1:] if not w.startswith("-")][1:]
        if words:
            yield os.path.basename(words[0])


def scan_script(text: str) -> ScriptNeeds:
    needs = ScriptNeeds()
    # the script's own variables (set anywhere in it, or lower-case: shell-local by convention)
    assigned = {m.group(1) for line in _code_lines(text) for m in [_ASSIGN.match(line)] if m}
    assigned |= {m.group(1) for m in re.finditer(r"\b(?:for|read)\s+([A-Za-z_]\w*)", text)}
    # GEMINI="${GEMINI_BIN:-gemini}" then "$GEMINI" ...: the CLI called through a variable
    aliases = {m.group(1): m.group(2) for m in re.finditer(
        r"^\s*(?:export\s+)?([A-Za-z_]\w*)=[\"']?(?:\$\{[A-Za-z_]\w*:-)?(" + "|".join(AGENT_CLIS) + r")\b",
        text, re.M)}
    heredoc: str | None = None
    for line in _code_lines(text):
        body = heredoc is not None                # a heredoc body is data: its expansions only
        if body and line == heredoc:
            heredoc = None
            continue
        m = None if body else re.search(r"<<-?\s*['\"]?([A-Za-z_]+)['\"]?", line)
        if m:
            heredoc = m.group(1)
        for cmd in () if body else _commands(line):
            cmd = aliases.get(cmd.lstrip("$").strip("{}"), cmd) if cmd.startswith("$") else cmd
            if cmd in AGENT_CLIS and cmd not in needs.clis:
                needs.clis.append(cmd)
        for e in _EXPANSION.finditer(line):
            name = e.group("braced") or e.group("bare")
            defaulted = e.group("op") in (":-", "-", ":=", "=", ":+", "+")
            if name in RESERVED_ENV or name in _SHELL_VARS or name != name.upper() or (name in assigned
                                                                                      and not defaulted):
                continue
            target = needs.optional if defaulted else needs.reads
            if name not in needs.reads and name not in needs.optional:
                target.append(name)
        for cd in _CD.finditer(line):
            target = cd.group("target").strip("\"'")
            if "$(" in target or "dirname" in target or target.startswith(("$WORKSPACE", "${WORKSPACE", "$OUTPUT_DIR")):
                continue
            if (target.startswith("$") or target.startswith("/")) and target not in needs.checkouts:
                needs.checkouts.append(target)
    return needs


def expand(target: str, environ: Mapping[str, str]) -> str:
    """A `cd` target as the operator's environment makes it: `$X`, `${X}`, `${X:-default}`."""
    def one(m: re.Match) -> str:
        name, default = m.group(1) or m.group(3), m.group(2)
        value = environ.get(name)
        if value:
            return value
        return expand(default, environ) if default is not None else ""
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)", one, target)


def missing_pieces(needs: ScriptNeeds, environ: Mapping[str, str], path: str | None = None) -> list[str]:
    """One line per missing CLI or checkout, naming it and how to supply it."""
    search = path if path is not None else environ.get("PATH", "")
    problems = [f"its start script calls `{cli}`, which is not on PATH: install it, or put its folder on the "
                f"harness's PATH" for cli in needs.clis if not shutil.which(cli, path=search)]
    for target in needs.checkouts:
        where = expand(target, environ)
        if not where or not os.path.isdir(where):
            names = [m.group(1) or m.group(2) for m in re.finditer(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)|\$([A-Za-z_]\w*)",
                                                                   target)]
            hint = f"set {names[0]} to the checkout" if names else "create it"
            problems.append(f"its start script does `cd {target}`, which is "
                            f"{'not a folder here: ' + where if where else 'empty here'}; {hint}")
    return problems


def unsupplied_checkouts(needs: ScriptNeeds, environ: Mapping[str, str], passed: set[str],
                         binds: list[str]) -> list[str]:
    """Checkouts that exist here but would not reach the agent: the variable naming one is not
    passed (the agent gets only declared names), or the folder is not bound into the sandbox."""
    problems = []
    for target in needs.checkouts:
        where = expand(target, environ)
        if not where or not os.path.isdir(where):
            continue          # missing_pieces names it
        names = [m.group(1) for m in re.finditer(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", target)]
        used = names[:1] if names and environ.get(names[0]) else names[1:]     # `${X:-default}`: X when set
        unpassed = [n for n in used if environ.get(n) and n not in passed and n not in RESERVED_ENV]
        if unpassed:
            problems.append(f"its start script does `cd {target}` and {unpassed[0]} is not passed to the agent: add it "
                            f"to the plan's agent_overlays.<agent>.env")
        real = os.path.realpath(where)
        if not any(real == b or real.startswith(b.rstrip("/") + "/") for b in binds):
            problems.append(f"its start script does `cd {target}` ({real}), which the sandbox does not show: add it "
                            f"to the plan's agent_overlays.<agent>.binds")
    return problems
