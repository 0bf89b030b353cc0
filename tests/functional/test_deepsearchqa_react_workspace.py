"""The `deepsearchqa` benchmark's train split (official questions, AutoRL-Bench's protocol) gives the
agent the grader's own ReAct loop: `deepsearchqa_api` imported from the split folder in a separate
Python process (no harness on its path) plays it with the agent's `generate`, including the forced
`answer[` completion asked with `stop=["]"], max_tokens=128`, and grades as the grader does."""

import json
import subprocess
import sys
import textwrap

from autorl_tui.catalog.tasks import load_task_card
from autorl_tui.tasks.deepsearchqa import provider
from tests.support.harness import REPO
from tests.support.official_interactive import dsqa_csv_bytes


def test_the_workspace_runner_plays_autorl_bench_s_loop(tmp_path, monkeypatch):
    csv_path = tmp_path / "DSQA-full.csv"
    csv_path.write_bytes(dsqa_csv_bytes(320))
    monkeypatch.setenv("DEEPSEARCHQA_PATH", str(csv_path))
    card = load_task_card(REPO / "autorl_tui" / "tasks" / "deepsearchqa")
    split = provider.materialize(card, "train", tmp_path / "cache")
    assert (split / "deepsearchqa_api" / "react.py").is_file() and not (split / "sft_chat.jsonl").exists()
    assert "run_react_episodes" in (split / "README.md").read_text()
    script = textwrap.dedent(f"""
        import json, re, sys
        sys.path.insert(0, {str(split)!r})
        from deepsearchqa_api import list_questions, open_backend, run_react_episodes
        qs = list_questions({str(split)!r})[:9]
        asked = []

        def generate(prompts, stop=None, max_tokens=None):
            asked.append((len(prompts), stop, max_tokens))
            out = []
            for p in prompts:
                n = int(re.search(r"Question number (\\d+):", p[-1]["content"]).group(1))
                if stop == ["]"]:
                    out.append(f"answer {{n}}] and more")          # the forced answer, cut at its stop
                elif n % 2:
                    out.append(f"I know it. Action: answer[answer {{n}}]")
                else:
                    out.append("I know it.\\nAction: answer[this line is cut by the stop]")
            return out

        rs = run_react_episodes(generate, qs, backend=open_backend(None, None, "duckduckgo"), batch_size=9)
        print(json.dumps({{"asked": asked, "results": [[q["question"], q["answer_type"], r.won, r.steps,
                                                        r.trajectory[-1]["answer"]] for q, r in zip(qs, rs)]}}))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["asked"][0] == [9, None, None]
    assert got["asked"][1][1:] == [["]"], 128]                   # only the replies without an action
    for question, kind, won, steps, answer in got["results"]:
        n = int(question.split()[2].rstrip(":"))
        assert steps == 1 and answer == f"answer {n}"
        assert won == (kind == "single"), question      # a set answer's gold holds other items
