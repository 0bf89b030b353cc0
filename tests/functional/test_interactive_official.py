"""The interactive benchmarks on their official data: `autorl-tui data get webshop|deepsearchqa`
fetches the files the shipped cards declare (from a local server with the hubs' layout, serving
files in the official shapes), verifies and places them in <home>/data/<task>/, and the benchmark
ids read them from there; without them those ids stop at validation, and their stand-ins need none."""

import sqlite3

import pytest

from autorl_tui.catalog.tasks import find_task, materialize, read_items, task_search_path
from autorl_tui.tasks.webshop import catalog as C
from tests.support.harness import REPO, cli
from tests.support.hub_server import HubServer
from tests.support.official_interactive import benchmark_card_on_hub, dsqa_csv_bytes, webshop_official_bytes

CASES = {"webshop": ("WEBSHOP_DATA", lambda: webshop_official_bytes(C.generate_products(seed=7, per_type=2)),
                     "/datasets/YWZBrandon/webshop-data/resolve/ce990fff5aee388db2706f07820c578ab68e0453/"),
         "deepsearchqa": ("DEEPSEARCHQA_PATH", lambda: {"DSQA-full.csv": dsqa_csv_bytes(420)},
                          "/datasets/google/deepsearchqa/resolve/b2623f8653065c2672de6d941fc5434cd652376c/")}


@pytest.mark.parametrize("task", sorted(CASES))
def test_data_get_places_the_official_files_and_the_benchmark_reads_them(tmp_path, task):
    variable, make_files, prefix = CASES[task]
    home, files = tmp_path / "home", make_files()
    env = {variable: ""}
    with HubServer() as hub:
        tasks = benchmark_card_on_hub(hub, task, files, tmp_path / "tasks")
        before = cli("--tasks-dir", str(tasks), "tasks", "validate", task, home=home, env=env)
        assert before.returncode == 2 and f"autorl-tui data get {task}" in before.stdout, before.stdout
        proc = cli("data", "get", task, "--tasks-dir", str(tasks), home=home, env={**hub.env(), **env})
        assert proc.returncode == 0, proc.stderr
        assert sorted(hub.requests) == sorted(prefix + name for name in files)   # where the shipped card says
    folder = home / "data" / task
    assert {name: (folder / name).read_bytes() for name in files} == files
    valid = cli("--tasks-dir", str(tasks), "tasks", "validate", task, home=home, env=env)
    assert valid.returncode == 0 and "valid" in valid.stdout, valid.stdout
    card = find_task(task, task_search_path([tasks]), data_home=home / "data")
    assert card.protocol_name == "autorl-bench" and card.protocol.max_steps in (6, 50)
    origin = card.to_dict()["data_origin"]
    assert origin["kind"] == "official" and origin["folder"] == str(folder)
    assert {f["path"] for f in origin["files"]} == set(files)
    test = read_items(materialize(card, "test", tmp_path / "cache") / "items.jsonl")
    assert test and all(item["id"] for item in test)


def test_the_shipped_cards_declare_the_official_files():
    """The benchmark cards name the files their benchmark publishes (pinned revisions, sha256); the
    stand-ins declare none and read no official data."""
    from autorl_tui.catalog.official_data import official_files
    from autorl_tui.catalog.tasks import load_task_card
    declared = {t: {f.path: f for f in official_files(load_task_card(REPO / "autorl_tui" / "tasks" / t).data)}
                for t in ("alfworld", "webshop", "deepsearchqa", "alfworld-gen", "webshop-mini", "deepsearchqa-gen")}
    assert set(declared["webshop"]) == {"items_shuffle_1000.json", "items_ins_v2_1000.json", "items_human_ins.json"}
    assert set(declared["deepsearchqa"]) == {"DSQA-full.csv"} and set(declared["alfworld"]) == {"react_prompts.json"}
    assert all(len(f.revision) == 40 for t in ("webshop", "deepsearchqa", "alfworld") for f in declared[t].values())
    assert not any(declared[t] for t in ("alfworld-gen", "webshop-mini", "deepsearchqa-gen"))
    for stand_in in ("alfworld-gen", "webshop-mini", "deepsearchqa-gen"):
        card = load_task_card(REPO / "autorl_tui" / "tasks" / stand_in)
        assert card.data["params"]["source"] == "generated" and card.protocol_names == ["default"]


def test_a_plan_naming_a_benchmark_without_its_data_stops_at_validation(tmp_path):
    """Exit 2, before anything is queued, naming `autorl-tui data get` and the variable."""
    plan = tmp_path / "plan.yaml"
    plan.write_text("name: p\ntasks: [deepsearchqa]\nagents: [baseline-copy]\nmodels: [tiny-dsqa]\nbudget: 1m\n"
                    "isolation: none\n")
    proc = cli("--plain", "--batch", str(plan), home=tmp_path / "home", env={"DEEPSEARCHQA_PATH": ""}, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert "autorl-tui data get deepsearchqa" in out and "DEEPSEARCHQA_PATH" in out and "Traceback" not in out
    store = tmp_path / "home" / "store.db"
    if store.exists():
        assert sqlite3.connect(store).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_alfworld_needs_its_games_and_its_prompt_file(tmp_path, monkeypatch):
    """The ALFWorld benchmark names what is missing: the games (`alfworld-download`, ALFWORLD_DATA,
    or json_2.1.1/ in the home's data folder), then AutoRL-Bench's prompt file (`autorl-tui data get
    alfworld`, ALFWORLD_REACT_PROMPTS); with both in the home it is available."""
    from autorl_tui.catalog.tasks import load_task_card, provider_data_missing
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    monkeypatch.delenv("ALFWORLD_REACT_PROMPTS", raising=False)
    data_home = tmp_path / "data"
    card = load_task_card(REPO / "autorl_tui" / "tasks" / "alfworld", data_home=data_home)
    why = provider_data_missing(card)
    assert "alfworld-download" in why and "ALFWORLD_DATA" in why and "alfworld-gen" in why
    (data_home / "alfworld" / "json_2.1.1" / "valid_unseen").mkdir(parents=True)
    why = provider_data_missing(card)
    assert "autorl-tui data get alfworld" in why and "ALFWORLD_REACT_PROMPTS" in why
    (data_home / "alfworld" / "react_prompts.json").write_text("{}")
    assert provider_data_missing(card) is None
    assert provider_data_missing(load_task_card(REPO / "autorl_tui" / "tasks" / "alfworld-gen")) is None
