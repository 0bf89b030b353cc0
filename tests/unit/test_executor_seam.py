"""Executors carry their behaviour: nothing outside `autorl_tui/executors/` decides anything
from an executor's name (`== "ray"`, `executor("docker")`, `!= "local"`, ...). It asks the
`Executor` interface instead (executors/base.py), so a new executor is its own files plus a
registry line (docs/ARCHITECTURE.md, "Adding an executor").

The count is read from the syntax tree. A branch is a comparison with an executor's name, a call
or subscript that passes one to something about executors, or a name inside a literal handed to a
call. `local` is also a data provider's name, so it counts only next to the word `executor`;
`docker` and `ray` count everywhere except as the Python package's own name (`sys.modules.get("ray")`).
The last test plants the old branches and checks that the counter finds each of them."""

from __future__ import annotations

import ast
from pathlib import Path

from autorl_tui import registry

PACKAGE = Path(__file__).resolve().parents[2] / "autorl_tui"
EXECUTORS = PACKAGE / "executors"
NAMES = set(registry.BUILTINS["executors"])
AMBIGUOUS = {"local"}                 # also a data provider's name (`provider: local`)
PACKAGE_LOOKUPS = ("sys.modules.get", "importlib.import_module", "find_spec")


def _names_in(node: ast.AST) -> set[str]:
    """Executor names among the string constants in `node` (literals included, nested calls not)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_names_in(e) for e in node.elts)) if node.elts else set()
    return set()


def _counts(found: set[str], context: str) -> bool:
    """Whether the executor names found in a node make it a branch, given the source around it."""
    return bool(found - AMBIGUOUS) or (bool(found) and "executor" in context.lower())


def branches(source: str, where: str = "<source>") -> list[str]:
    tree = ast.parse(source)
    out: list[str] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        text = ""
        hit = False
        if isinstance(node, ast.Compare):
            found = set().union(*(_names_in(o) for o in [node.left, *node.comparators]))
            text = ast.unparse(node)
            hit = _counts(found, text + " " + function)
        elif isinstance(node, ast.Call):
            callee = ast.unparse(node.func)
            found = set().union(*(_names_in(a) for a in [*node.args, *(k.value for k in node.keywords)]))
            text = ast.unparse(node)
            hit = not callee.endswith(PACKAGE_LOOKUPS) and _counts(found, callee + " " + function)
        elif isinstance(node, ast.Subscript):
            found = _names_in(node.slice)
            text = ast.unparse(node)
            hit = bool(found) and "executor" in ast.unparse(node.value).lower()
        if hit:
            out.append(f"{where}:{node.lineno}: {text}")
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "")
    return out


def test_no_executor_name_branches_outside_the_executors_package():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if EXECUTORS in path.parents:
            continue
        found += branches(path.read_text(), str(path.relative_to(PACKAGE.parent)))
    assert found == [], "executor-name branches outside executors/ (ask the Executor interface):\n" + \
        "\n".join(found)


def test_the_counter_finds_each_kind_of_branch():
    """The branches this seam replaced, one per line: each must be found (the count bites)."""
    planted = '''
def executor(self, name):
    options = {} if name == "local" else {"home": self.home.root}
def f(self, req, s, r, ex):
    if req.executor == "docker": pass
    if req.executor != "ray" and req.gpus: pass
    on_cluster = self.spec.get("executor") == "ray"
    ex = self.executor("ray")
    if "ray" in self._executors: pass
    self._executors["ray"].forget(s.run_id)
    held = reader.live_attempts("ray")
    if executor in ("local", "docker"): pass
    Select([("local", "local"), ("docker", "docker")], value="local")
    link = self.spec.get("executor", "local") != "local"
'''
    found = branches(planted)
    lines = sorted({int(f.split(":")[1]) for f in found})
    assert lines == [3, *range(5, 15)], found


def test_what_is_not_a_branch():
    """A data provider called `local`, the ray package's import check, a default: not executor branches."""
    clean = '''
if provider == "local": pass
if card.data.get("provider") == "local": pass
ray = sys.modules.get("ray")
executor = raw.get("executor", DEFAULT_EXECUTOR)
'''
    assert branches(clean) == []
