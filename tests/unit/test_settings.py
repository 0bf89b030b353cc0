"""The typed settings object (autorl_tui/settings.py) and its table (docs/settings.md)."""
import re
from pathlib import Path

import pytest

from autorl_tui import cli, settings
from autorl_tui.exitcodes import UsageError
from autorl_tui.settings import Settings

REPO = Path(__file__).resolve().parents[2]


def test_an_empty_environment_gives_the_defaults():
    s = Settings.from_environ({})
    assert s == Settings()
    assert s.warm_grader and s.alfworld_parse_cache and s.plain_heartbeat_s == 30.0
    assert s.home is None and s.tasks_dirs == () and s.github_endpoint.startswith("https://")


def test_each_kind_of_value_is_parsed_to_its_type():
    s = Settings.from_environ({
        "AUTORL_HOME": "~/h", "AUTORL_TASKS_DIR": "/a::/b", "AUTORL_WARM_GRADER": "off",
        "AUTORL_PLAIN_HEARTBEAT_S": "2.5", "AUTORL_ALFWORLD_NO_PARSE_CACHE": "1", "AUTORL_JUDGE_URL": " http://j/v1 ",
        "AUTORL_GRADER_MEMORY": "", "AUTORL_TEMPLATES": "/t"})
    assert s.home == Path("~/h").expanduser()
    assert s.tasks_dirs == (Path("/a"), Path("/b"))
    assert s.warm_grader is False and s.alfworld_parse_cache is False
    assert s.plain_heartbeat_s == 2.5 and s.judge_url == "http://j/v1"
    assert s.grader_memory is None          # empty: the default
    assert s.templates == (Path("/t"),)


@pytest.mark.parametrize("var,value,says", [
    ("AUTORL_PLAIN_HEARTBEAT_S", "soon", "is not a number of seconds"),
    ("AUTORL_PLAIN_HEARTBEAT_S", "-1", "is not a number of seconds"),
    ("AUTORL_PLAIN_HEARTBEAT_S", "nan", "is not a number of seconds"),
    ("AUTORL_WARM_GRADER", "maybe", "is not a switch"),
])
def test_a_bad_value_is_a_usage_error_naming_the_variable_and_the_value(var, value, says):
    with pytest.raises(UsageError) as err:
        Settings.from_environ({var: value})
    assert f"{var}={value!r} {says}" in str(err.value)


def test_current_follows_the_environment_and_parses_each_one_once(monkeypatch, tmp_path):
    monkeypatch.setenv("AUTORL_HOME", str(tmp_path / "one"))
    first = settings.current()
    assert first.home == tmp_path / "one"
    assert settings.current() is first            # the same environment: not parsed again
    monkeypatch.setenv("AUTORL_HOME", str(tmp_path / "two"))
    assert settings.current().home == tmp_path / "two"


def test_a_bad_value_stops_any_command_with_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setenv("AUTORL_WARM_GRADER", "maybe")
    assert cli.main(["tasks", "list"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["autorl-tui: error: AUTORL_WARM_GRADER='maybe' is not a switch: set it to 1 (on) or 0 (off)"]


def test_the_docs_table_lists_exactly_the_settings_fields():
    rows = re.findall(r"^\| `(AUTORL_[A-Z_]+)` \| `(\w+)` \|", (REPO / "docs" / "settings.md").read_text(), re.M)
    assert sorted(rows) == sorted((var, field) for field, (var, _) in settings.VARIABLES.items())
    assert set(settings.VARIABLES) == set(Settings.__dataclass_fields__)


# Copied into agents' workspaces, where nothing of autorl_tui may be imported (test_alfworld's
# "without the harness installed"): they read their one variable themselves.
STANDALONE = {"autorl_tui/tasks/alfworld/game.py"}


def test_no_module_but_settings_reads_an_autorl_variable():
    read = re.compile(r"(environ\.get|environ\[|getenv)\(?\s*[\"'](AUTORL_[A-Z_]+)[\"']")
    offenders = []
    for path in (REPO / "autorl_tui").rglob("*.py"):
        if path.relative_to(REPO).as_posix() in STANDALONE:
            continue
        text = path.read_text()
        # a variable's name in a constant, read through it: ENV = "AUTORL_X" ... os.environ.get(ENV)
        consts = dict(re.findall(r"^(\w+)\s*=\s*[\"'](AUTORL_[A-Z_]+)[\"']", text, re.M))
        by_const = re.compile(r"(environ\.get|environ\[|getenv)\(?\s*(" + "|".join(consts or ["$^"]) + r")\b")
        hits = [(m, m.group(2)) for m in read.finditer(text)]
        hits += [(m, consts[m.group(2)]) for m in by_const.finditer(text)]
        for m, var in hits:
            after = text[m.end():m.end() + 4]
            if var in settings.INTERNAL or (m.group(1) == "environ[" and after.lstrip("]").lstrip().startswith("=")):
                continue      # a channel to a child process, or a write for one (cli's --judge-url)
            offenders.append(f"{path.relative_to(REPO)}:{text[:m.start()].count(chr(10)) + 1} {var}")
    assert offenders == [], "read AUTORL_* through autorl_tui.settings.current(): " + ", ".join(offenders)
