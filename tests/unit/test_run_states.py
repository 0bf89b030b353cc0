"""One run-state vocabulary (autorl_tui/run_states.py) and one end-of-runs summary (print_outcome)."""
import io
import re
from pathlib import Path

from autorl_tui import run_states
from autorl_tui.commands._display import print_outcome
from autorl_tui.exitcodes import ExitCode
from autorl_tui.store.db import Store
from autorl_tui.store.queries import StoreReader
from autorl_tui.tui.formatting import STATE_STYLE
from tests.support.run_writer import RunShape, write_run

PACKAGE = Path(__file__).resolve().parents[2] / "autorl_tui"


def _spelled(states: tuple[str, ...]) -> re.Pattern:
    return re.compile(r"[(\[{]\s*" + r",\s*".join(f"""["']{s}["']""" for s in states) + r",?\s*[)\]}]")


def test_the_state_groups_are_written_only_in_run_states():
    groups = {"final": run_states.FINAL_STATES, "active": run_states.ACTIVE_STATES,
              "unsuccessful": run_states.UNSUCCESSFUL_STATES}
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "run_states.py":
            continue
        text = path.read_text()
        found += [f"{path.relative_to(PACKAGE)}: the {name} states" for name, states in groups.items()
                  if _spelled(states).search(text)]
    assert found == [], "import them from autorl_tui.run_states: " + "; ".join(found)


def test_sql_and_the_console_agree_with_the_vocabulary():
    views = (PACKAGE / "reports" / "sql" / "views.sql").read_text()
    in_sql = re.findall(r"r\.state IN \(([^)]*)\)", views)
    assert in_sql and all(tuple(re.findall(r"'(\w+)'", s)) == run_states.FINAL_STATES for s in in_sql)
    assert set(STATE_STYLE) == set(run_states.ALL_STATES)
    assert len(set(run_states.ALL_STATES)) == len(run_states.ALL_STATES)
    assert set(run_states.UNSUCCESSFUL_STATES) == set(run_states.FINAL_STATES) - {"done"}


def test_the_one_summary_prints_the_table_and_next_and_returns_the_exit_code(tmp_path):
    store = Store(tmp_path / "store.db")
    write_run(store, RunShape("r0001-arith-a-s0"))
    write_run(store, RunShape("r0002-arith-a-s1", state="failed"))
    store.flush()
    rows = [{"id": r.id, "state": r.state} for r in map(StoreReader.over(store).run, ["r0001-arith-a-s0",
                                                                                        "r0002-arith-a-s1"])]
    out = io.StringIO()
    code = print_outcome(StoreReader.over(store), tmp_path, rows, "p", stream=out)
    text = out.getvalue()
    assert code == ExitCode.RUN_FAILED
    assert text.count("summary (scores 0-100") == 1 and "r0001-arith-a-s0" in text and "r0002-arith-a-s1" in text
    assert "next:" in text and "retry    autorl-tui retry RUN" in text and "compare --plan p" in text
    quiet = io.StringIO()
    assert print_outcome(StoreReader.over(store), tmp_path, rows[:1], show_next=False, stream=quiet) == ExitCode.OK
    assert "next:" not in quiet.getvalue() and "r0001-arith-a-s0" in quiet.getvalue()
    store.close()
