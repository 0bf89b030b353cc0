"""A task card names the folders its grader reads (`data.grader_env`): the engine's grading side
passes those variables and binds those folders, and names no task's variable itself (issue 33)."""
from pathlib import Path

from autorl_tui.grading_host.grader_service import server_key, task_data_env, task_data_folders

PACKAGE = Path(__file__).resolve().parents[2] / "autorl_tui"


def test_the_card_names_the_grader_s_data_folders(tmp_path, monkeypatch):
    games = tmp_path / "games"
    games.mkdir()
    monkeypatch.setenv("MY_GAMES", str(games))
    monkeypatch.setenv("MISSING_DATA", str(tmp_path / "nowhere"))
    monkeypatch.delenv("UNSET_DATA", raising=False)
    request = {"task": {"data": {"grader_env": ["MY_GAMES", "MISSING_DATA", "UNSET_DATA"]}}}
    assert task_data_env(request) == ["MY_GAMES", "MISSING_DATA", "UNSET_DATA"]
    assert task_data_folders(request) == (games,)       # only a folder that exists is bound
    assert server_key(request, tmp_path / "g" / "w", None, 1, None).extra_ro == (games,)
    # a card that names none gets none, whatever the engine's environment holds
    monkeypatch.setenv("ALFWORLD_DATA", str(games))
    assert task_data_folders({"task": {"data": {}}}) == ()
    assert server_key({"task": {"data": {}}}, tmp_path / "g" / "w", None, 1, None).extra_ro == ()


def test_the_engine_side_names_no_task_s_variable():
    sides = ["engine", "grading_host", "executors", "isolation", "daemon", "instrument"]
    found = [str(p.relative_to(PACKAGE)) for side in sides for p in (PACKAGE / side).rglob("*.py")
             if "ALFWORLD_DATA" in p.read_text() or "WEBSHOP_DATA" in p.read_text()]
    assert found == []
