"""Carve `autorl_tui/engine/` into packages by job: a re-runnable codemod (issue 33).

    python scripts/carve_engine.py [ROOT] [--dry-run]

ROOT is a git checkout (default: this one). For each row of MOVES (old module or package -> new),
it `git mv`s the files, then rewrites every reference to the old names in the tracked text files:
dotted names (`autorl_tui.engine.gpus`, in imports, strings, registry entries, mypy.ini sections,
import-linter contracts), `from autorl_tui.engine import gpus` (split when the names now live in
different packages), relative imports, `Path(__file__).parents[N]` in moved files, and paths
(`autorl_tui/engine/executors/docker.py`, `engine/gpus.py`, `executors/sandbox_bwrap.py`,
`"autorl_tui" / "engine" / "executors" / "x.py"`). It creates the new packages' `__init__.py` and
places them in the import-linter contracts of pyproject.toml.

Idempotent: on a tree already carved it finds nothing to move or rewrite. A package row moves
everything in the package, also modules added after this table was written; a module under
`engine/` that no row names stays there. Prints what it did; exit 0, or 2 with a one-line error.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

PKG = "autorl_tui"

# old module or package -> new one (a package row carries everything under it).
MOVES: dict[str, str] = {
    # isolation: the bubblewrap sandbox (agents and graders), its network namespace, the seccomp
    # filter and the stdlib entry program of containers and sandboxes
    "autorl_tui.engine.executors.sandbox_bwrap": "autorl_tui.isolation.sandbox_bwrap",
    "autorl_tui.engine.executors.sandbox_net": "autorl_tui.isolation.sandbox_net",
    "autorl_tui.engine.executors.seccomp_userns": "autorl_tui.isolation.seccomp_userns",
    "autorl_tui.engine.executors.container_init": "autorl_tui.isolation.container_init",
    # executors, with what this host offers a run (its GPUs, the agents' Python runtime)
    "autorl_tui.engine.executors": "autorl_tui.executors",
    "autorl_tui.engine.gpus": "autorl_tui.executors.gpus",
    "autorl_tui.engine.agent_runtime": "autorl_tui.executors.agent_runtime",
    # instrumentation
    "autorl_tui.engine.instrument": "autorl_tui.instrument",
    # a leaf module (files written and read without following an agent's links)
    "autorl_tui.engine.safe_files": "autorl_tui.safe_files",
    # the engine side of grading, next to grading/
    "autorl_tui.engine.grading_client": "autorl_tui.grading_host.grading_client",
    "autorl_tui.engine.grader_service": "autorl_tui.grading_host.grader_service",
    "autorl_tui.engine.ray_grading": "autorl_tui.grading_host.ray_grading",
    "autorl_tui.engine.grading_queue": "autorl_tui.grading_host.grading_queue",
    "autorl_tui.engine.grading_placement": "autorl_tui.grading_host.grading_placement",
    "autorl_tui.engine.submissions": "autorl_tui.grading_host.submissions",
    "autorl_tui.engine.submitted_folder": "autorl_tui.grading_host.submitted_folder",
    "autorl_tui.engine.submission_errors": "autorl_tui.grading_host.submission_errors",
    "autorl_tui.engine.snapshot_retention": "autorl_tui.grading_host.snapshot_retention",
    # the detached engine: its socket server, its client, the process, the console's snapshot
    "autorl_tui.engine.server": "autorl_tui.daemon.server",
    "autorl_tui.engine.client": "autorl_tui.daemon.client",
    "autorl_tui.engine.daemon": "autorl_tui.daemon.daemon",
    "autorl_tui.engine.run_summaries": "autorl_tui.daemon.run_summaries",
}

# Task folders' files named for what they are (the task kit): the grader's adapter of an interactive
# task (grader_env.py, never copied to a workspace) and the one-episode engines copied into the
# agent's `<task>_api/` package (game.py, tool_loop.py). `api.py` keeps its name: agents import
# `<task>_api.api`. Inside the moved module's folder the workspace file names ("env.py") and
# relative imports follow (TASK_FILE_NAMES).
MOVES.update({
    "autorl_tui.tasks.alfworld.env": "autorl_tui.tasks.alfworld.game",
    "autorl_tui.tasks.deepsearchqa.env": "autorl_tui.tasks.deepsearchqa.tool_loop",
    "autorl_tui.tasks.alfworld.environment": "autorl_tui.tasks.alfworld.grader_env",
    "autorl_tui.tasks.webshop.environment": "autorl_tui.tasks.webshop.grader_env",
    "autorl_tui.tasks.deepsearchqa.environment": "autorl_tui.tasks.deepsearchqa.grader_env",
})

NEW_PACKAGES: dict[str, str] = {
    "autorl_tui.isolation": "Isolation of agents and graders: the bubblewrap sandbox (sandbox_bwrap.py), its network\n"
                            "namespace (sandbox_net.py), the seccomp filter, the stdlib entry program of containers\n"
                            "and sandboxes (container_init.py). docs/security.md.",
    "autorl_tui.grading_host": "The engine side of grading: the grader worker started in a sandbox (grading_client.py),\n"
                               "the warm grading server (grader_service.py), grading slots (grading_queue.py), placement\n"
                               "inputs, gradings on a Ray cluster, submitted folders measured and copied. It knows no\n"
                               "run's state: the engine's run pipeline (engine/run_grading.py) calls it.",
    "autorl_tui.daemon": "The detached engine: its socket server (server.py), the client every front end uses\n"
                         "(client.py), the process (daemon.py) and the console's paged snapshot (run_summaries.py).",
}

# import-linter: where the new packages sit (inserted after the anchor entry when absent).
LAYER_INSERTS: list[tuple[str, list[str]]] = [
    ("autorl_tui.tui", ["autorl_tui.daemon"]),
    ("autorl_tui.engine | autorl_tui.reports",
     ["autorl_tui.grading_host", "autorl_tui.executors | autorl_tui.instrument | autorl_tui.interop",
      "autorl_tui.isolation"]),
]
# (contract id, key, packages that must be in its list)
CONTRACT_LISTS: list[tuple[str, str, list[str]]] = [
    ("tui-via-client", "forbidden_modules", ["autorl_tui.daemon"]),
    ("no-textual-below-tui", "source_modules",
     ["autorl_tui.daemon", "autorl_tui.grading_host", "autorl_tui.executors", "autorl_tui.instrument",
      "autorl_tui.isolation", "autorl_tui.interop"]),
    ("grader-knows-no-runs", "forbidden_modules",
     ["autorl_tui.daemon", "autorl_tui.grading_host", "autorl_tui.executors", "autorl_tui.instrument"]),
    ("reports-read-store", "forbidden_modules",
     ["autorl_tui.daemon", "autorl_tui.grading_host", "autorl_tui.executors", "autorl_tui.instrument",
      "autorl_tui.isolation"]),
    ("catalog-is-data", "forbidden_modules",
     ["autorl_tui.daemon", "autorl_tui.grading_host", "autorl_tui.executors", "autorl_tui.instrument",
      "autorl_tui.isolation"]),
]

TEXT_SUFFIXES = {".py", ".md", ".toml", ".ini", ".cfg", ".yaml", ".yml", ".sh", ".txt", ".j2", ".tcss"}
TEXT_NAMES = {"Makefile", "run"}
SELF = Path(__file__).resolve()
# files that name the old layout on purpose: this codemod and its test's "old branch" fixture
KEEP = {"scripts/carve_engine.py", "tests/unit/test_carve_engine.py"}


class CarveError(Exception):
    pass


def map_module(dotted: str) -> str | None:
    """The new name of a dotted module (or attribute path) under a moved one, or None."""
    best = max((old for old in MOVES if dotted == old or dotted.startswith(old + ".")), key=len, default=None)
    return None if best is None else MOVES[best] + dotted[len(best):]


def module_path(root: Path, dotted: str) -> Path | None:
    base = root.joinpath(*dotted.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.exists():
            return cand
    return None


def file_module(root: Path, path: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# -- moving files ---------------------------------------------------------------------------------

def plan_moves(root: Path) -> list[tuple[Path, Path]]:
    """(old file, new file) for every tracked .py and data file under a moved module or package."""
    moves = []
    for f in sorted((root / PKG).rglob("*")):
        if not f.is_file() or "__pycache__" in f.parts:
            continue
        rel = f.relative_to(root)
        dotted = ".".join(rel.with_suffix("").parts) if f.suffix == ".py" else ".".join(rel.parts[:-1])
        target = map_module(dotted)
        if target is None:
            continue
        if f.suffix == ".py":
            new = root.joinpath(*target.split(".")).with_suffix(".py")
        else:
            # a data file inside a moved package goes with it
            new = root.joinpath(*target.split("."), f.name)
        moves.append((f, new))
    return moves


def git(root: Path, *args: str) -> str:
    res = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    if res.returncode != 0:
        raise CarveError(f"git {' '.join(args)} failed: {res.stderr.strip()}")
    return res.stdout


# -- rewriting ------------------------------------------------------------------------------------

DOTTED = re.compile(r"\bautorl_tui(?:\.[A-Za-z_]\w*)+")
# a path naming something under engine/ (with or without autorl_tui/), or executors/ / instrument/
# as written relative to engine/ in the docs
ENGINE_PATH = re.compile(r"(?<![\w./-])((?:autorl_tui/)?(?:engine|tasks)/(?:[A-Za-z_]\w*/)*[A-Za-z_]\w*(?:\.py)?/?)")
REL_PATH = re.compile(r"(?<![\w./-])((?:executors|instrument)/(?:[A-Za-z_]\w*/)*[A-Za-z_]\w*(?:\.py)?)")
PATH_CHAIN = re.compile(r'"(?:autorl_tui|engine|tasks)"(?:\s*/\s*"[\w.]+")+')


def rewrite_dotted(text: str) -> str:
    def sub(m: re.Match) -> str:
        return map_module(m.group(0)) or m.group(0)
    return DOTTED.sub(sub, text)


def _map_path(path: str, implicit_engine: bool) -> str | None:
    trailing = "/" if path.endswith("/") else ""
    body = path.rstrip("/")
    has_pkg = body.startswith(PKG + "/")
    if has_pkg:
        body = body[len(PKG) + 1:]
    is_py = body.endswith(".py")
    stem = body[:-3] if is_py else body
    parts = stem.split("/")
    if implicit_engine:
        parts = ["engine", *parts]
    if is_py and parts[-1] == "__init__":
        return None
    new = map_module(".".join([PKG, *parts]))
    if new is None:
        return None
    new_parts = new.split(".")[1:]
    out = "/".join(new_parts) + (".py" if is_py else "") + trailing
    if implicit_engine and out == path:
        return None
    return (PKG + "/" if has_pkg else "") + out


def rewrite_paths(text: str) -> str:
    text = ENGINE_PATH.sub(lambda m: _map_path(m.group(1), False) or m.group(1), text)
    text = REL_PATH.sub(lambda m: _map_path(m.group(1), True) or m.group(1), text)

    def chain(m: re.Match) -> str:
        segs = re.findall(r'"([\w.]+)"', m.group(0))
        path = "/".join(segs)
        mapped = _map_path(path if segs[0] == PKG else path, False)
        if mapped is None:
            return m.group(0)
        return " / ".join(f'"{s}"' for s in mapped.split("/"))
    return PATH_CHAIN.sub(chain, text)


def _resolve_relative(importer: str, is_pkg: bool, level: int, module: str | None) -> str:
    base = importer.split(".")
    if not is_pkg:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _exists(root: Path, dotted: str) -> bool:
    if module_path(root, dotted) is not None:
        return True
    new = map_module(dotted)
    return new is not None and module_path(root, new) is not None


def rewrite_from_imports(src: str, root: Path, old_module: str | None, new_module: str, is_pkg: bool) -> str:
    """`from P import a, b` whose names now live apart, and relative imports whose target moved
    (or whose importer did): rewritten as absolute imports, one per new parent package."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return src
    lines = src.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level and old_module is None:
            continue          # a relative import outside the package (a test's fixture folder)
        if node.level:
            target = _resolve_relative(old_module, is_pkg, node.level, node.module)
        else:
            target = node.module or ""
        if not (node.level or map_module(target)
                or any(map_module(f"{target}.{a.name}") for a in node.names)):
            continue
        groups: dict[str, list[str]] = {}     # new parent -> "name" / "new_name as bound_name"
        renamed = False
        for alias in node.names:
            full = f"{target}.{alias.name}"
            name = alias.name
            if alias.name != "*" and _exists(root, full) and map_module(full):
                parent, _, name = map_module(full).rpartition(".")
            else:
                parent = map_module(target) or target
            bound = alias.asname or alias.name
            renamed = renamed or name != alias.name    # a module renamed in its folder keeps its bound name
            groups.setdefault(parent, []).append(name if name == bound else f"{name} as {bound}")
        if node.level:
            # unchanged when the relative import still names the same module from the new place
            new_target_here = _resolve_relative(new_module, is_pkg, node.level, node.module)
            if old_module == new_module and not map_module(target) and \
                    not any(map_module(f"{target}.{a.name}") for a in node.names):
                continue
            if len(groups) == 1 and next(iter(groups)) == new_target_here and not renamed:
                continue
        elif len(groups) == 1 and next(iter(groups)) == target and not renamed:
            continue
        elif len(groups) == 1 and map_module(target) and next(iter(groups)) == map_module(target) and not renamed:
            continue   # the dotted rewrite handles a plain rename
        first = lines[node.lineno - 1]
        indent = first[: len(first) - len(first.lstrip())]
        last = lines[node.end_lineno - 1]
        tail = last[node.end_col_offset:].rstrip("\n")
        if first[: node.col_offset].strip() or (tail.strip() and not tail.strip().startswith("#")):
            raise CarveError(f"{old_module}: line {node.lineno}: an import shares its line; split it by hand")
        stmts = []
        here = new_module if is_pkg else new_module.rpartition(".")[0]
        for parent, aliases in groups.items():
            names = ", ".join(aliases)
            source = parent
            if node.level == 1 and parent.startswith(here + "."):
                source = "." + parent[len(here) + 1:]         # a task folder's files import each other relatively
            elif node.level == 1 and parent == here:
                source = "."
            stmt = f"{indent}from {source} import {names}"
            if len(stmt) > 110:
                inner = ",\n".join(f"{indent}    {a}" for a in aliases)
                stmt = f"{indent}from {source} import (\n{inner},\n{indent})"
            stmts.append(stmt)
        edits.append((node.lineno - 1, node.end_lineno, "\n".join(stmts) + tail + "\n"))
    for start, end, new in sorted(edits, reverse=True):
        lines[start:end] = [new]
    return "".join(lines)


PARENTS = re.compile(r"(Path\(__file__\)(?:\.resolve\(\))?\.parents\[)(\d+)(\])")


def rewrite_file_depth(src: str, old_rel: Path, new_rel: Path) -> str:
    """`Path(__file__).parents[N]` naming the package root or the checkout: N for the new depth."""
    old_parts, new_parts = old_rel.parts, new_rel.parts

    def sub(m: re.Match) -> str:
        n = int(m.group(2))
        ancestor_len = len(old_parts) - 1 - n
        if ancestor_len > 1:
            return m.group(0)        # a folder inside the package: moved along or gone (checked below)
        return f"{m.group(1)}{len(new_parts) - 1 - ancestor_len}{m.group(3)}"
    return PARENTS.sub(sub, src)


def rewrite_folder_names(text: str, rel: str) -> str:
    """In a moved module's own folder: its file name as a string (`"env.py"`, the workspace copy's
    name) and as a relative import (`from .env import`, also inside a written __init__ template)."""
    for old, new in MOVES.items():
        old_parts, new_parts = old.split("."), new.split(".")
        if old_parts[:-1] != new_parts[:-1] or old_parts[0] != PKG:
            continue                      # only renames within a folder
        folder = "/".join(old_parts[:-1]) + "/"
        if not rel.startswith(folder) or "/" in rel[len(folder):]:
            continue
        text = re.sub(rf'(["\']){re.escape(old_parts[-1])}\.py\1', rf"\g<1>{new_parts[-1]}.py\g<1>", text)
        text = re.sub(rf"\bfrom \.{re.escape(old_parts[-1])} import\b", f"from .{new_parts[-1]} import", text)
    return text


def tracked_text_files(root: Path) -> list[Path]:
    out = []
    for rel in git(root, "ls-files", "-z").split("\0"):
        if not rel:
            continue
        p = root / rel
        if rel in KEEP or p.resolve() == SELF or not p.is_file():
            continue
        if p.suffix in TEXT_SUFFIXES or p.name in TEXT_NAMES:
            out.append(p)
    return out


# -- import-linter contracts ----------------------------------------------------------------------

def _contract_span(text: str, cid: str) -> tuple[int, int] | None:
    m = re.search(rf'^id = "{re.escape(cid)}"\s*$', text, re.M)
    if not m:
        return None
    start = text.rfind("[[tool.importlinter.contracts]]", 0, m.start())
    nxt = text.find("\n[", m.end())
    return start, (len(text) if nxt < 0 else nxt)


def place_in_contracts(text: str) -> str:
    span = _contract_span(text, "layers")
    if span:
        block = text[span[0]:span[1]]
        m = re.search(r"layers = \[\n(.*?)\n\]", block, re.S)
        if m:
            entries = re.findall(r'"([^"]+)"', m.group(1))
            present = {p.strip() for e in entries for p in e.split("|")}
            for anchor, adds in LAYER_INSERTS:
                if anchor not in entries:
                    raise CarveError(f"pyproject.toml: the layers contract has no {anchor!r}; place the new packages by hand")
                at = entries.index(anchor) + 1
                for add in adds:
                    if all(p.strip() not in present for p in add.split("|")):
                        entries.insert(at, add)
                        present.update(p.strip() for p in add.split("|"))
                    if add in entries:
                        at = entries.index(add) + 1
            body = "\n".join(f'    "{e}",' for e in entries)
            block = block[: m.start(1)] + body + block[m.end(1):]
            block = re.sub(r",\n\]", ",\n]", block)
            text = text[: span[0]] + block + text[span[1]:]
    for cid, key, pkgs in CONTRACT_LISTS:
        span = _contract_span(text, cid)
        if not span:
            continue
        block = text[span[0]:span[1]]
        m = re.search(rf"^{key} = \[(.*?)\]", block, re.S | re.M)
        if not m:
            continue
        have = re.findall(r'"([^"]+)"', m.group(1))
        missing = [p for p in pkgs if p not in have]
        if not missing:
            continue
        inner = m.group(1).rstrip()
        sep = ",\n" + " " * (len(key) + 4)
        new_inner = inner + sep + ", ".join(f'"{p}"' for p in missing)
        block = block[: m.start(1)] + new_inner + block[m.end(1):]
        text = text[: span[0]] + block + text[span[1]:]
    return text


# -- main -----------------------------------------------------------------------------------------

def carve(root: Path, dry_run: bool = False) -> list[str]:
    done: list[str] = []
    moves = plan_moves(root)
    tracked = set(git(root, "ls-files").splitlines())
    # where each moved module was and will be (for relative imports and __file__ depths)
    moved_modules = {file_module(root, new): (file_module(root, old), old.name == "__init__.py", old, new)
                     for old, new in moves}
    for old, new in moves:
        done.append(f"move {old.relative_to(root)} -> {new.relative_to(root)}")
        if dry_run:
            continue
        new.parent.mkdir(parents=True, exist_ok=True)
        if str(old.relative_to(root)) in tracked:
            git(root, "mv", str(old.relative_to(root)), str(new.relative_to(root)))
        else:
            old.rename(new)
    if dry_run:
        return done
    for dotted, doc in NEW_PACKAGES.items():
        init = root.joinpath(*dotted.split("."), "__init__.py")
        if init.parent.is_dir() and not init.exists():
            init.write_text(f'"""{doc}"""\n')
            git(root, "add", str(init.relative_to(root)))
            done.append(f"create {init.relative_to(root)}")
    # empty folders left behind (only __pycache__ in them)
    for old, _ in moves:
        d = old.parent
        while d != root / PKG and d.exists() and all(c.name == "__pycache__" for c in d.iterdir()):
            for c in d.iterdir():
                subprocess.run(["rm", "-rf", str(c)], check=True)
            d.rmdir()
            d = d.parent
    for path in tracked_text_files(root):
        src = path.read_text(encoding="utf-8", errors="surrogateescape")
        new = src
        if path.suffix == ".py":
            mod = file_module(root, path) if path.is_relative_to(root / PKG) else ""
            old_mod, is_pkg, old_file, _ = moved_modules.get(mod, (mod or None, path.name == "__init__.py", None, None))
            new = rewrite_from_imports(new, root, old_mod, mod, is_pkg)
            if old_file is not None:
                new = rewrite_file_depth(new, old_file.relative_to(root), path.relative_to(root))
        new = rewrite_folder_names(new, str(path.relative_to(root)))
        new = rewrite_dotted(new)
        new = rewrite_paths(new)
        if path.name == "pyproject.toml":
            new = place_in_contracts(new)
        if new != src:
            path.write_text(new, encoding="utf-8", errors="surrogateescape")
            done.append(f"rewrite {path.relative_to(root)}")
    return done


def main(argv: list[str]) -> int:
    args = [a for a in argv[1:] if not a.startswith("--")]
    dry = "--dry-run" in argv
    root = Path(args[0]).resolve() if args else SELF.parents[1]
    if not (root / PKG).is_dir():
        print(f"carve_engine: {root} has no {PKG}/ folder; pass the checkout's root", file=sys.stderr)
        return 2
    try:
        done = carve(root, dry)
    except CarveError as exc:
        print(f"carve_engine: {exc}", file=sys.stderr)
        return 2
    for line in done:
        print(line)
    print(f"carve_engine: {len(done)} change(s){' (dry run)' if dry else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
