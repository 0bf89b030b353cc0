"""What the benchmarks name of autorl_tui, checked against the tree as it is (a refactor that moves a
module, renames a function or a keyword breaks a benchmark silently: `make bench` is not run by
`make test`). Read from each benchmarks/*.py's syntax, then imported for real:

- every `from autorl_tui.X import a, b` (at the top or inside a function) and `import autorl_tui.X`:
  the module imports and has each name;
- every call of such a name (`LaunchSpec(grading_socket=...)`, `build_split(card, "train")`): its
  arguments bind to the signature of what is called (calls that spread `*args`/`**kwargs` are
  left out).

    python -m tests.support.bench_names [benchmarks/bench_x.py ...]   # prints the problems, exit 1 if any
"""
from __future__ import annotations

import ast
import importlib
import inspect
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO / "benchmarks"


def _imports(tree: ast.Module) -> tuple[list[tuple[str, str | None, int]], dict[str, tuple[str, str]]]:
    """(module, name or None, line) for each autorl_tui import, and local name -> (module, name)."""
    found: list[tuple[str, str | None, int]] = []
    bound: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("autorl_tui"):
            for alias in node.names:
                found.append((node.module or "", alias.name, node.lineno))
                bound[alias.asname or alias.name] = (node.module or "", alias.name)
        elif isinstance(node, ast.Import):
            found += [(alias.name, None, node.lineno) for alias in node.names if alias.name.startswith("autorl_tui")]
    return found, bound


def _refusal(target, positional: int, keywords: list[str]) -> str | None:
    """Why a call with this many positional arguments and these keywords does not bind, or None."""
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*range(positional), **dict.fromkeys(keywords))
    except TypeError as exc:
        return str(exc)
    return None


def problems(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found, bound = _imports(tree)
    out: list[str] = []
    resolved: dict[str, object] = {}
    for module, name, line in found:
        where = f"{path.name}:{line}"
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            out.append(f"{where}: `{module}` does not import ({exc})")
            continue
        if name is None:
            continue
        if not hasattr(mod, name):
            try:                                   # `from package import submodule`
                resolved[name] = importlib.import_module(f"{module}.{name}")
            except ImportError:
                out.append(f"{where}: `{module}` has no `{name}`")
            continue
        resolved[name] = getattr(mod, name)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            continue
        local = node.func.id
        if local not in bound:
            continue
        target = resolved.get(bound[local][1])
        if target is None or not callable(target):
            continue
        why = _refusal(target, len(node.args), [k.arg for k in node.keywords if k.arg is not None])
        if why:
            out.append(f"{path.name}:{node.lineno}: `{local}(...)` does not fit its signature: {why}")
    return out


def bench_files() -> list[Path]:
    return sorted(BENCHMARKS.glob("*.py"))


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(REPO))
    paths = [Path(a) for a in argv] or bench_files()
    found = [p for path in paths for p in problems(path)]
    for line in found:
        print(line)
    print(f"{len(paths)} benchmark files read, {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
