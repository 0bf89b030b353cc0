"""`autorl-tui data get TASK`: official files fetched from the hubs' layout (a local server here,
HF_ENDPOINT / AUTORL_GITHUB_ENDPOINT pointing at it), verified, placed in <home>/data/<task>/, and
read by the task from there; a benchmark task without its data stops at plan validation."""

import json
import os
from pathlib import Path

import yaml

from autorl_tui.catalog.tasks import find_task, materialize, read_items, task_search_path
from tests.support.harness import REPO, card_without_code, cli, write_plan
from tests.support.hub_server import HubServer

GSM8K_CARD = REPO / "autorl_tui" / "tasks" / "gsm8k" / "task.yaml"


def gsm8k_rows(n, offset=0):
    return "".join(json.dumps({"question": f"Sam has {i} apples and gets 1,000 more. How many?",
                               "answer": f"{i} + 1000 = {i + 1000}\n#### {i + 1000:,}"}) + "\n"
                   for i in range(offset, offset + n)).encode()


def gsm8k_card_with(tasks_dir: Path, official: list[dict]) -> Path:
    """The real gsm8k card, its official files declared as the local server publishes them."""
    card = card_without_code(yaml.safe_load(GSM8K_CARD.read_text()))     # the card alone, not its code
    card["data"]["official"] = official
    card["data"]["default"] = str(tasks_dir / "no-default-copy")
    folder = tasks_dir / "gsm8k"
    folder.mkdir(parents=True)
    (folder / "task.yaml").write_text(yaml.safe_dump(card, sort_keys=False))
    (folder / "description.md").write_text((GSM8K_CARD.parent / "description.md").read_text())
    return tasks_dir


def test_data_get_fetches_verifies_and_the_task_reads_it(tmp_path, monkeypatch):
    home = tmp_path / "home"
    with HubServer() as hub:
        official = [hub.publish("github", "openai/grade-school-math", "abc123", "grade_school_math/data/train.jsonl",
                                gsm8k_rows(520), "train.jsonl"),
                    hub.publish("huggingface", "someone/gsm8k-copy", "main", "test.jsonl", gsm8k_rows(9, 5000),
                                "test.jsonl")]
        tasks = gsm8k_card_with(tmp_path / "tasks", official)
        env = {**hub.env(), "GSM8K_PATH": ""}
        proc = cli("data", "get", "gsm8k", "--tasks-dir", str(tasks), home=home, env=env)
        assert proc.returncode == 0, proc.stderr
        assert "/openai/grade-school-math/abc123/grade_school_math/data/train.jsonl" in hub.requests
        assert "/datasets/someone/gsm8k-copy/resolve/main/test.jsonl" in hub.requests
    folder = home / "data" / "gsm8k"
    assert f"official data verified in {folder}" in proc.stdout
    assert (folder / "train.jsonl").read_bytes() == gsm8k_rows(520)
    assert official[0]["sha256"] in proc.stdout
    assert sorted(p.name for p in (home / "data").iterdir()) == ["gsm8k"]     # no staging folder left
    # `tasks validate` finds it there too (the dev split drawn from train is a declared overlap).
    valid = cli("--tasks-dir", str(tasks), "tasks", "validate", "gsm8k", home=home, env={"GSM8K_PATH": ""})
    assert valid.returncode == 0 and "valid (train 520, dev 500, test 9)" in valid.stdout, valid.stdout
    # The card reads it from the home, and says where it came from.
    monkeypatch.delenv("GSM8K_PATH", raising=False)
    card = find_task("gsm8k", task_search_path([tasks]), data_home=home / "data")
    test = read_items(materialize(card, "test", tmp_path / "cache"))
    assert len(test) == 9 and test[0]["answer"].endswith("#### 6,000")
    origin = card.to_dict()["data_origin"]
    assert origin["kind"] == "official" and origin["folder"] == str(folder)
    assert [f["sha256"] for f in origin["files"]] == [o["sha256"] for o in official]
    # A file changed after it was verified is no longer called official.
    (folder / "test.jsonl").write_bytes(gsm8k_rows(3))
    assert card.to_dict()["data_origin"]["kind"] == "local copy"


def test_a_checksum_mismatch_places_nothing(tmp_path):
    home = tmp_path / "home"
    with HubServer() as hub:
        good = hub.publish("github", "openai/grade-school-math", "abc", "train.jsonl", gsm8k_rows(520), "train.jsonl")
        bad = hub.publish("github", "openai/grade-school-math", "abc", "test.jsonl", gsm8k_rows(5), "test.jsonl")
        bad["sha256"] = "0" * 64
        tasks = gsm8k_card_with(tmp_path / "tasks", [good, bad])
        proc = cli("data", "get", "gsm8k", "--tasks-dir", str(tasks), home=home, env=hub.env())
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr and "does not match the card's checksum" in proc.stderr
    assert "nothing was placed" in proc.stderr
    assert list((home / "data").iterdir()) == []


def test_a_missing_file_on_the_hub_is_a_clear_error(tmp_path):
    home = tmp_path / "home"
    with HubServer() as hub:
        entry = hub.publish("huggingface", "x/y", "main", "a.jsonl", b"{}\n", "train.jsonl")
        hub.files.clear()
        tasks = gsm8k_card_with(tmp_path / "tasks", [entry])
        proc = cli("data", "get", "gsm8k", "--tasks-dir", str(tasks), home=home, env=hub.env())
    assert proc.returncode == 3 and "HTTP 404" in proc.stderr and "HF_ENDPOINT" in proc.stderr, proc.stderr


def test_a_task_without_official_files_says_so(tmp_path):
    proc = cli("data", "get", "arith", home=tmp_path / "home")
    assert proc.returncode == 2 and "declares no official data files" in proc.stderr, proc.stderr


def test_a_benchmark_task_without_its_data_stops_at_plan_validation(tmp_path):
    home = tmp_path / "home"
    plan = write_plan(tmp_path / "plan.yaml", tasks=["gsm8k"], agents=["baseline-copy"])
    env = {"GSM8K_PATH": str(tmp_path / "nowhere"), "HOME": str(tmp_path / "user")}
    proc = cli("--batch", str(plan), "--plain", home=home, env=env, timeout=300)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "autorl-tui data get gsm8k" in proc.stderr and "GSM8K_PATH" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_alpacaeval_unpinned_files_are_recorded_and_read(tmp_path, monkeypatch):
    """The alpacaeval card's hub files carry `sha256: unpinned` (their checksums could not be
    obtained offline): `data get` fetches them from the hubs' layout, records the checksum of what
    arrived, the task reads them, and the data origin says official but unpinned."""
    from tests.support import alpacaeval_data

    home = tmp_path / "home"
    monkeypatch.delenv("ALPACAEVAL_PATH", raising=False)
    with HubServer() as hub:
        published = alpacaeval_data.publish(hub, n_eval=12, n_alpaca=90)
        proc = cli("data", "get", "alpacaeval", home=home, env={**hub.env(), "ALPACAEVAL_PATH": ""})
        assert proc.returncode == 0, proc.stderr
        assert "/datasets/tatsu-lab/alpaca/resolve/main/data/train-00000-of-00001-a09b74b3ef9c3b56.parquet" \
            in hub.requests
    folder = home / "data" / "alpacaeval"
    manifest = json.loads((folder / ".official.json").read_text())
    assert [f["sha256"] for f in manifest["files"]] == [p["sha256"] for p in published]
    assert all(f["pinned"] is False for f in manifest["files"])
    assert "not pinned by the card" in proc.stdout
    card = find_task("alpacaeval", task_search_path([]), data_home=home / "data")
    test_path = materialize(card, "test", tmp_path / "cache")
    test = read_items(test_path / "items.jsonl")      # a judged split is a folder: items and the GLM's file
    dev = read_items(materialize(card, "dev", tmp_path / "cache") / "items.jsonl")
    train = read_items(materialize(card, "train", tmp_path / "cache"))
    assert [t["id"] for t in test][:2] == ["alpacaeval-000", "alpacaeval-001"] and len(test) == 12
    assert test[0]["reference_generator"] == "gpt4_turbo" and (test_path / "df_gamed.csv").is_file()
    assert len(train) == 90 and set(train[0]) == {"instruction", "input", "output", "question", "answer"}
    assert train[0]["question"] == train[0]["instruction"] + "\n\nContext 0"       # AutoRL-Bench's question
    assert len(dev) == 64 and dev[-1]["prompt"] == train[-1]["question"]
    origin = card.to_dict()["data_origin"]
    assert origin["kind"] == "official" and all(f["pinned"] is False for f in origin["files"])
    assert [f["sha256"] for f in origin["files"]] == [p["sha256"] for p in published]
    # The folder changed after `data get`: no longer official.
    (folder / "df_gamed.csv").write_text("model,index\n")
    assert card.to_dict()["data_origin"]["kind"] == "local copy"
    # Without the data, plan-time availability names both ways to get it.
    from autorl_tui.tasks.alpacaeval.provider import available
    bare = find_task("alpacaeval", task_search_path([]), data_home=tmp_path / "empty")
    assert "autorl-tui data get alpacaeval" in available(bare) and "ALPACAEVAL_PATH" in available(bare)


def test_alpacaeval_without_its_data_stops_at_plan_validation(tmp_path):
    plan = write_plan(tmp_path / "plan.yaml", tasks=["alpacaeval"])
    proc = cli("--plain", "--batch", str(plan), home=tmp_path / "home", env={"ALPACAEVAL_PATH": ""}, timeout=300)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert "autorl-tui data get alpacaeval" in proc.stderr and "ALPACAEVAL_PATH" in proc.stderr
    assert not (tmp_path / "home" / "models" / "tiny").exists()      # refused before anything was built
