"""Stream parsers over traces written from each format's documentation (tests/data/traces/),
each with malformed lines and event types the parser does not know."""

import json
from pathlib import Path

import pytest

from autorl_tui.catalog.agents import known_output_formats, load_agent_spec
from autorl_tui.instrument.actions import Action, UsageTotals
from autorl_tui.instrument.parsers import get_parser, output_formats

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"


def parse(fmt: str, trace: str) -> list[Action]:
    return get_parser(fmt).feed_all((TRACES / trace).read_text().splitlines())


def kinds(actions, kind):
    return [a for a in actions if a.kind == kind]


def totals(actions) -> dict:
    t = UsageTotals()
    for a in actions:
        t.add(a)
    return t.run_fields()


def test_claude_stream_json():
    acts = parse("claude_stream_json", "claude_stream_json.jsonl")
    shells = kinds(acts, "shell")
    assert [(s.command, s.exit_code) for s in shells] == [
        ("ls data models", 0), ("python code/missing.py", 2), ("sleep 1000", None)]
    assert shells[0].output == "train.jsonl\ntiny"
    assert shells[2].extra == {"unfinished": True}          # flushed by finish(): killed mid-command
    edits = kinds(acts, "file_edit")
    assert [e.path for e in edits] == ["/ws/code/train.py"] * 2
    assert "+print('training v2')" in edits[1].diff
    assert kinds(acts, "reasoning")[0].text == "Look at the data first."
    assert kinds(acts, "message")[0].text == "I'll look around the workspace."
    assert [c.name for c in kinds(acts, "tool_call")] == ["Bash", "Write", "Edit", "Bash", "Read", "Bash"]
    read = kinds(acts, "tool_result")[0]
    assert read.name == "Read" and "# Task" in read.output and read.is_error is False
    assert len(kinds(acts, "malformed")) == 1 and kinds(acts, "malformed")[0].line.startswith("this line")
    assert {a.event["subtype"] for a in kinds(acts, "raw")} == {"init", "compact_boundary"}
    # Per-message usage counted once per message id; the result's session totals top it up.
    assert totals(acts) == {"tokens_in": 1270 + 300 + 8500, "tokens_out": 180, "cost_usd": 0.0421}


def test_claude_error_result_becomes_error_action():
    p = get_parser("claude_stream_json")
    acts = p.feed(json.dumps({"type": "result", "subtype": "error_max_turns", "is_error": True,
                              "num_turns": 30, "usage": {"input_tokens": 5, "output_tokens": 1}}))
    assert [a.kind for a in acts] == ["usage", "error"]
    assert acts[1].text == "error_max_turns" and acts[1].extra["num_turns"] == 30


def test_codex_json():
    acts = parse("codex_json", "codex_json.jsonl")
    shells = kinds(acts, "shell")
    assert [(s.command, s.exit_code, s.is_error) for s in shells] == [
        ("bash -lc ls", 0, None), ("python code/train.py", 1, True), ("sleep 100", None, None)]
    assert shells[0].output == "code\ndata\nmodels\n"
    # a started command gets exactly one tool_call (not another on completion)
    assert [c.input for c in kinds(acts, "tool_call") if c.name == "shell"] == [
        {"command": "bash -lc ls"}, {"command": "python code/train.py"}, {"command": "sleep 100"}]
    assert [(e.path, e.summary_text) for e in kinds(acts, "file_edit")] == [
        ("/ws/code/train.py", "add"), ("/ws/code/util.py", "update")]
    assert [m.text for m in kinds(acts, "message")] == ["Submitted output/v1.", "old spelling"]
    assert kinds(acts, "tool_result")[0].output == "SFTTrainer"
    assert len(kinds(acts, "error")) == 2
    assert len(kinds(acts, "malformed")) == 1
    raw_types = [a.event.get("type") for a in kinds(acts, "raw")]
    assert raw_types == ["thread.started", "todo_list", "session.configured"]
    assert totals(acts) == {"tokens_in": 24763, "tokens_out": 122, "cost_usd": None}


def test_gemini_stream_json():
    acts = parse("gemini_stream_json", "gemini_stream_json.jsonl")
    assert [m.text for m in kinds(acts, "message")] == ["Let me look around.", "Done."]   # deltas joined
    assert [(s.command, s.exit_code) for s in kinds(acts, "shell")] == [("ls -la", None), ("python code/bad.py", 2)]
    assert kinds(acts, "file_edit")[0].path == "/ws/code/train.py"
    assert kinds(acts, "tool_result")[0].name == "google_web_search"
    assert kinds(acts, "error")[0].extra == {"severity": "warning"}
    assert kinds(acts, "malformed")[0].line == "Loaded cached credentials."
    assert [a.event["type"] for a in kinds(acts, "raw")] == ["init", "checkpoint"]
    assert totals(acts) == {"tokens_in": 5000, "tokens_out": 200, "cost_usd": None}


def test_opencode_json():
    acts = parse("opencode_json", "opencode_json.jsonl")
    assert [(s.command, s.exit_code) for s in kinds(acts, "shell")] == [("ls", 0), ("python code/train.py; exit 3", 3)]
    edits = kinds(acts, "file_edit")
    assert [e.summary_text for e in edits] == ["write", "edit"] and "+print(2)" in edits[1].diff
    failed = kinds(acts, "tool_result")[0]
    assert failed.is_error and "File not found" in failed.output
    assert kinds(acts, "error")[0].text == "rate limited"
    assert kinds(acts, "reasoning")[0].text == "Check the files."
    assert len(kinds(acts, "malformed")) == 1
    assert [type(a.event).__name__ for a in kinds(acts, "raw")] == ["list", "dict"]
    t = totals(acts)
    assert t["tokens_in"] == 900 + 100 + 300 + 1000 + 50 and t["tokens_out"] == 50 + 20
    assert t["cost_usd"] == pytest.approx(0.002)


def test_openhands_sdk_events_multiline_and_markers():
    acts = parse("openhands", "openhands_sdk.jsonl")
    assert [(s.command, s.exit_code) for s in kinds(acts, "shell")] == [("ls", 0), ("python code/train.py", 1)]
    assert kinds(acts, "shell")[0].output == "code data models"
    assert kinds(acts, "file_edit")[0].path == "/ws/code/train.py"
    assert kinds(acts, "reasoning")[0].text == "First, list the workspace."
    assert kinds(acts, "error")[0].text == "Tool terminal timed out"
    assert kinds(acts, "message")[-1].text == "Submitted output/v1"
    assert [a.event["kind"] for a in kinds(acts, "raw")] == ["PauseEvent"]
    assert kinds(acts, "malformed") == []       # plain log text is not JSON-like; the pretty event parsed
    bad = get_parser("openhands").feed('{"kind": "ActionEvent", oops}')
    assert [a.kind for a in bad] == ["malformed"]


def test_openhands_v0_events_and_cumulative_metrics():
    acts = parse("openhands", "openhands_v0.jsonl")
    assert [(s.command, s.exit_code) for s in kinds(acts, "shell")] == [("ls", 0)]
    assert kinds(acts, "file_edit")[0].diff.endswith("+print(1)")
    assert kinds(acts, "message")[0].text == "All done."          # the user's prompt is not an action
    assert totals(acts) == {"tokens_in": 2500, "tokens_out": 120, "cost_usd": 0.025}


def test_openhands_unfinished_multiline_event_is_malformed():
    p = get_parser("openhands")
    assert p.feed("{") == [] and p.feed('  "kind": "ActionEvent",') == []
    acts = p.finish()
    assert [a.kind for a in acts] == ["malformed"] and "never completed" in acts[0].text


def test_react_json():
    acts = parse("react_json", "react_json.jsonl")
    assert [a.kind for a in acts] == ["raw", "message", "tool_call", "shell", "file_edit", "tool_result",
                                      "usage", "usage", "raw", "raw", "malformed", "error"]
    assert "bogus_field" in acts[8].text
    assert totals(acts) == {"tokens_in": 1700, "tokens_out": 100, "cost_usd": None}


@pytest.mark.parametrize("fmt", ["claude_stream_json", "codex_json", "gemini_stream_json", "opencode_json",
                                 "openhands", "react_json"])
def test_every_parser_survives_hostile_lines(fmt):
    p = get_parser(fmt)
    hostile = ["", "   ", "null", "42", "[]", '"str"', "{", "}", '{"type": 5}', '{"type": "assistant", "message": 7}',
               '{"type": "item.completed", "item": "x"}', '{"type": "tool_use", "part": []}', "\x00\xff",
               '{"kind": "ActionEvent", "action": "run"}', '{"action": 1, "args": "x"}']
    out = []
    for line in hostile:
        out.extend(p.feed(line))
    out.extend(p.finish())
    assert all(isinstance(a, Action) for a in out)
    for a in out:
        json.dumps(a.to_dict())                    # storable as event data
        assert len(a.summary()) <= 200 and "\n" not in a.summary()


def test_action_roundtrip_and_validation():
    a = Action("shell", command="ls", exit_code=0, output="x" * 30_000)
    d = a.to_dict()
    assert d["output"].endswith("more characters]") and len(d["output"]) < 20_100
    assert Action.from_dict(d).to_dict() == d
    with pytest.raises(ValueError, match="unknown action kind"):
        Action("bogus")
    with pytest.raises(ValueError, match="unknown action field"):
        Action.from_dict({"kind": "shell", "nope": 1})


def test_registry_and_catalog_validation(tmp_path):
    assert set(output_formats()) == known_output_formats()
    with pytest.raises(ValueError, match="known: claude_stream_json"):
        get_parser("yaml_stream")
    spec = tmp_path / "a.yaml"
    spec.write_text("name: a\ncommand: echo hi\noutput_format: codex_json\n")
    assert load_agent_spec(spec).output_format == "codex_json"
