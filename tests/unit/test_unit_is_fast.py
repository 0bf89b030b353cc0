"""A unit test is fast: one that starts a program or loads a model is marked `subprocess` (or `slow`),
so `pytest tests/unit -m "not subprocess and not slow"` runs in seconds. Read from the test files'
syntax: a test spawns when its body, a module function it calls or a fixture of its module it takes
starts a process (subprocess, asyncio subprocesses, the CLI harness `cli(...)`), or it takes a model
fixture (`tiny_model_dir`)."""
import ast
import re
from pathlib import Path

UNIT = Path(__file__).resolve().parent
SPAWNS = re.compile(r"\bsubprocess\.(run|Popen|check_call|check_output|call)\(|create_subprocess_(exec|shell)\("
                    r"|(?<![\w.])cli\(|\.from_pretrained\(|TransformersPolicy\(|build_tiny\w*\(")
MODEL_FIXTURES = {"tiny_model_dir"}
MARKS = {"subprocess", "slow", "long"}


def _marks(decorators: list[ast.expr]) -> set[str]:
    names = set()
    for d in decorators:
        text = ast.unparse(d)
        names.update(re.findall(r"pytest\.mark\.(\w+)", text))
    return names


def _module_marks(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            return set(re.findall(r"pytest\.mark\.(\w+)", ast.unparse(node.value)))
    return set()


def _called_names(fn: ast.AST) -> set[str]:
    return {n.func.id for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def unmarked_spawning_tests(path: Path) -> list[str]:
    source = path.read_text()
    tree = ast.parse(source)
    if _module_marks(tree) & MARKS:
        return []
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    spawning = {name for name, fn in functions.items() if SPAWNS.search(ast.get_source_segment(source, fn) or "")}
    # one level of indirection more: helpers and fixtures that call a spawning helper or take a model
    for name, fn in functions.items():
        args = {a.arg for a in fn.args.args}
        if _called_names(fn) & spawning or args & MODEL_FIXTURES:
            spawning.add(name)
    offenders = []
    for name, fn in functions.items():
        if not name.startswith("test_") or _marks(fn.decorator_list) & MARKS:
            continue
        args = {a.arg for a in fn.args.args}
        if name in spawning or args & (spawning | MODEL_FIXTURES):
            offenders.append(f"{path.name}::{name}")
    return offenders


def test_unit_tests_that_start_programs_or_load_models_are_marked():
    offenders = [o for path in sorted(UNIT.glob("test_*.py")) if path != Path(__file__).resolve()
                 for o in unmarked_spawning_tests(path)]
    assert offenders == [], ("mark these @pytest.mark.subprocess (or move them to tests/functional): "
                             + ", ".join(offenders))


def test_the_check_sees_a_spawn_through_a_helper_and_a_fixture(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import subprocess, pytest\n"
        "def run(*a):\n    return subprocess.run(a)\n"
        "@pytest.fixture\ndef built(tiny_model_dir):\n    return tiny_model_dir\n"
        "def test_direct():\n    run('true')\n"
        "def test_fixture(built):\n    pass\n"
        "def test_pure():\n    assert 1 + 1 == 2\n"
        "@pytest.mark.subprocess\ndef test_marked():\n    run('true')\n")
    assert unmarked_spawning_tests(sample) == ["test_sample.py::test_direct", "test_sample.py::test_fixture"]
