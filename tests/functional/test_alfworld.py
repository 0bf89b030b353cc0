"""ALFWorld in the real engine: generated games load and are won by their planner walkthrough,
splits are disjoint (test in unseen rooms), the train split carries what the agent needs, and the
env_success scorer gives 100% to the expert, 0% to a policy that only says "look", and stores
every trajectory. Games are generated once per session (a few per split, to stay fast)."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autorl_tui.catalog.tasks import load_task_card, materialize
from autorl_tui.grading.scorers import get_scorer
from autorl_tui.grading.types import EvalProtocol, ScorerContext

REPO = Path(__file__).resolve().parents[2]
TASK_TYPES = ("pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
              "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place")


def small_card(tmp: Path, name: str, task_types, splits: dict):
    """The shipped alfworld card with fewer games (same generator, same protocol otherwise)."""
    card = load_task_card(REPO / "autorl_tui" / "tasks" / "alfworld-gen")
    card.data = json.loads(json.dumps(card.data))
    card.data["params"]["source"] = "generated"
    card.data["params"]["task_types"] = list(task_types)
    card.data["splits"] = splits
    card.id = f"alfworld-{name}"
    return card


@pytest.fixture(scope="session")
def alfworld_data(tmp_path_factory):
    d = tmp_path_factory.mktemp("alfworld_data")
    os.environ["ALFWORLD_DATA"] = str(d)   # before anything imports alfworld
    return d


@pytest.fixture(scope="session")
def all_types_train(alfworld_data, tmp_path_factory):
    """One train game of each of the six task types."""
    cache = tmp_path_factory.mktemp("alfworld_cache")
    card = small_card(cache, "all", TASK_TYPES, {"train": {"seed": 1, "n_per_type": 1, "rooms": "seen"}})
    return card, materialize(card, "train", cache)


@pytest.fixture(scope="session")
def three_splits(alfworld_data, tmp_path_factory):
    cache = tmp_path_factory.mktemp("alfworld_cache3")
    card = small_card(cache, "splits", ["pick_and_place_simple"], {
        "train": {"seed": 1, "n_per_type": 2, "rooms": "seen"},
        "dev": {"seed": 2, "n_per_type": 1, "rooms": "seen"},
        "test": {"seed": 3, "n_per_type": 1, "rooms": "unseen"}})
    return card, {s: materialize(card, s, cache) for s in ("train", "dev", "test")}


def items_of(split_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (split_dir / "items.jsonl").read_text().splitlines()]


def evaluate(card, split_dir, policy, progress=lambda done, total, stage: None, **protocol_overrides):
    protocol = EvalProtocol.from_dict({**card.protocol.to_dict(), **protocol_overrides})
    ctx = ScorerContext(task_dir=card.dir, split="train", split_path=split_dir, scratch_dir=split_dir,
                        options=card.scorer_options, log=lambda s: None, progress=progress)
    return get_scorer("env_success").evaluate(policy, items_of(split_dir), protocol, ctx)


def test_every_task_type_is_generated_and_the_files_are_in_the_engines_format(all_types_train):
    _, train = all_types_train
    items = items_of(train)
    assert sorted(i["task_type"] for i in items) == sorted(TASK_TYPES)
    for item in items:
        game = json.loads((train / item["gamefile"]).read_text())
        traj = json.loads((train / item["gamefile"]).with_name("traj_data.json").read_text())
        assert {"pddl_domain", "grammar", "pddl_problem", "solvable", "walkthrough"} <= set(game)
        assert "UNKNOWN GOAL" not in game["grammar"] and item["goal"] in game["grammar"]
        assert traj["task_type"] == item["task_type"]
        assert {"object_target", "parent_target", "toggle_target", "mrecep_target", "object_sliced"} <= set(
            traj["pddl_params"])
        assert game["walkthrough"] == item["expert_actions"] and item["expert_actions"]


def test_a_fresh_engine_replays_each_stored_walkthrough_to_a_win(all_types_train):
    """Through the registered environment's episode interface (grading/environments.py)."""
    from autorl_tui import registry
    env = registry.load("environments", "alfworld")()
    _, train = all_types_train
    items = items_of(train)
    for item, episode in zip(items, env.episodes(items, train)):
        game = env.open(episode)
        obs = game.reset()
        assert not obs.won and f"Your task is to: {item['goal']}" in obs.text
        assert game.task == item["goal"] or item["goal"] in game.task
        for action in item["expert_actions"]:
            assert action in obs.admissible, (item["id"], action)
            assert not obs.done and obs.reward == 0.0
            obs = game.step(action)
        assert obs.won and obs.done and obs.reward == 1.0, item["id"]
        assert obs.moves == len(item["expert_actions"])
        game.close()


def test_scorer_gives_the_replayed_expert_100_percent_and_stores_trajectories(all_types_train):
    from autorl_tui.tasks.alfworld.policies import ReplayExpertPolicy
    card, train = all_types_train
    items = items_of(train)
    policy = ReplayExpertPolicy(train, items)
    result = evaluate(card, train, policy)
    assert result.score == 100.0
    for tt in TASK_TYPES:
        assert result.metrics[f"success_rate/{tt}"] == 100.0
    assert result.metrics["invalid_action_rate"] == 0.0
    longest = max(len(i["expert_actions"]) for i in items)
    assert policy.calls == longest          # batched: one generate call per step for all episodes
    assert result.metrics["mean_steps_to_success"] == sum(len(i["expert_actions"]) for i in items) / len(items)
    for sample, item in zip(result.samples, items):
        assert sample.correct and sample.failure_kind is None and sample.sample_id == item["id"]
        traj = sample.data["trajectory"]
        assert [s["action"] for s in traj] == item["expert_actions"]
        assert [s["step"] for s in traj] == list(range(1, len(traj) + 1))
        assert all(s["observation"] and s["raw_output"] and "feedback" in s for s in traj)
        assert traj[-1]["won"] and sample.data["outcome"] == "won"


def test_scorer_reports_episodes_done_and_the_progress_file_then_ignores_backend_batches(all_types_train, tmp_path):
    from autorl_tui.grading.progress import ProgressFile
    from autorl_tui.tasks.alfworld.policies import ReplayExpertPolicy
    card, train = all_types_train
    items = items_of(train)
    heard, written = [], ProgressFile(tmp_path / "progress.json")

    def progress(done, total, stage):
        heard.append((done, total, stage))
        written.scorer(done, total, stage)

    evaluate(card, train, ReplayExpertPolicy(train, items), progress=progress)
    n = len(items)
    assert heard[0] == (0, n, "episodes") and heard[-1] == (n, n, "episodes"), heard
    assert [d for d, _, _ in heard] == sorted(d for d, _, _ in heard), heard
    written.inference(1, 1)             # a step's generate batch is not an episode: not written
    assert json.loads((tmp_path / "progress.json").read_text()) == {"done": n, "total": n, "stage": "episodes"}


def test_scorer_gives_a_look_only_policy_zero(all_types_train):
    from autorl_tui.tasks.alfworld.policies import FixedCommandPolicy
    card, train = all_types_train
    result = evaluate(card, train, FixedCommandPolicy("look"), max_steps=4)
    assert result.score == 0.0 and result.metrics["mean_steps_to_success"] is None
    assert all(s.data["steps"] == 4 and s.failure_kind == "wrong_answer" for s in result.samples)
    assert all(s.data["outcome"] == "max_steps" for s in result.samples)


def test_gibberish_replies_are_invalid_steps(all_types_train):
    from autorl_tui.tasks.alfworld.policies import FixedCommandPolicy
    card, train = all_types_train
    result = evaluate(card, train, FixedCommandPolicy("zqxj vvv"), max_steps=2)
    assert result.score == 0.0 and result.metrics["invalid_action_rate"] == 100.0
    assert all(s.failure_kind == "format_error" for s in result.samples)
    assert result.samples[0].data["trajectory"][0]["feedback"] == "Nothing happens."


def test_scorer_rejects_unknown_options(all_types_train):
    from autorl_tui.tasks.alfworld.policies import FixedCommandPolicy
    card, train = all_types_train
    ctx = ScorerContext(task_dir=card.dir, split="train", split_path=train, scratch_dir=train,
                        options={"fewshot": True}, log=lambda s: None)
    with pytest.raises(ValueError, match="unknown scorer option.*fewshot"):
        get_scorer("env_success").evaluate(FixedCommandPolicy(), [], card.protocol, ctx)


def test_splits_are_disjoint_and_test_uses_unseen_rooms(three_splits):
    from autorl_tui.tasks.alfworld.games import UNSEEN_ROOMS
    _, paths = three_splits
    items = {s: items_of(p) for s, p in paths.items()}
    assert [len(items[s]) for s in ("train", "dev", "test")] == [2, 1, 1]
    sigs = {s: {i["signature"] for i in v} for s, v in items.items()}
    ids = {s: {i["id"] for i in v} for s, v in items.items()}
    for a, b in (("train", "dev"), ("train", "test"), ("dev", "test")):
        assert not sigs[a] & sigs[b] and not ids[a] & ids[b]
    rooms = {s: {i["floorplan"] for i in v} for s, v in items.items()}
    assert rooms["test"] <= UNSEEN_ROOMS
    assert not (rooms["train"] | rooms["dev"]) & UNSEEN_ROOMS
    # the held-out games live only in their own split folders, never under train
    train_files = {p.name for p in paths["train"].rglob("*")}
    assert not (ids["dev"] | ids["test"]) & train_files
    assert not (paths["dev"] / "sft_chat.jsonl").exists() and not (paths["test"] / "alfworld_api").exists()


def test_check_split_of_tasks_validate_finds_a_game_missing_on_disk(three_splits, tmp_path):
    from autorl_tui.tasks.alfworld.provider import check_split
    card, paths = three_splits
    assert all(check_split(card, split, path) == [] for split, path in paths.items())
    dev = tmp_path / "dev"
    shutil.copytree(paths["dev"], dev)
    gamefile = dev / items_of(dev)[0]["gamefile"]
    gamefile.with_name("traj_data.json").unlink()
    (what, fix), = check_split(card, "dev", dev)
    assert "1 game(s) of items.jsonl are not on disk" in what and items_of(dev)[0]["id"] in what and fix


def test_generation_is_deterministic_by_seed(three_splits, tmp_path):
    card, paths = three_splits
    again = materialize(card, "dev", tmp_path)
    assert [i["signature"] for i in items_of(again)] == [i["signature"] for i in items_of(paths["dev"])]


def test_train_split_carries_sft_data_with_the_graders_prompts(all_types_train):
    from autorl_tui.tasks.alfworld.prompts import build_messages
    _, train = all_types_train
    items = items_of(train)
    chat = [json.loads(x) for x in (train / "sft_chat.jsonl").read_text().splitlines()]
    pc = [json.loads(x) for x in (train / "sft_prompt_completion.jsonl").read_text().splitlines()]
    experts = [json.loads((train / i["gamefile"]).with_name("expert.json").read_text()) for i in items]
    assert sum(e["search_steps"] is not None for e in experts) >= len(items) - 1
    assert len(chat) == len(pc) == sum(len(e["search_steps"] or e["steps"]) for e in experts)
    first, expert = chat[0], experts[0]
    steps = expert["search_steps"] or expert["steps"]
    assert first["messages"][:-1] == build_messages(expert["intro"], [], steps[0]["admissible"],
                                                    task_type=items[0]["task_type"])
    assert first["messages"][-1] == {"role": "assistant", "content": steps[0]["action"]}
    assert pc[0]["prompt"] == first["messages"][:-1] and pc[0]["completion"] == [first["messages"][-1]]
    assert len((train / "expert_trajectories.jsonl").read_text().splitlines()) == len(items)
    assert sorted(p.stem for p in (train / "few_shot").glob("*.txt")) == sorted(TASK_TYPES)


def test_searching_expert_wins_and_only_adds_visits_before_fetching(all_types_train):
    """The searching expert's trajectory is a real engine replay: it wins, and apart from the
    extra visits (go to / open) it is the planner's plan."""
    _, train = all_types_train
    for item in items_of(train):
        expert = json.loads((train / item["gamefile"]).with_name("expert.json").read_text())
        if expert["search_steps"] is None:
            continue
        search = [s["action"] for s in expert["search_steps"]]
        assert search[-1] == item["expert_actions"][-1]
        it = iter(search)
        assert all(a in it for a in item["expert_actions"] if not a.startswith("open "))
        assert all(a.startswith(("go to ", "open ")) for a in search if a not in item["expert_actions"])


def test_workspace_api_runs_an_episode_without_the_harness_installed(all_types_train, alfworld_data, tmp_path):
    """The agent's copy of the episode runner imports nothing from autorl_tui."""
    _, train = all_types_train
    script = textwrap.dedent("""
        import json, sys
        sys.path.insert(0, sys.argv[1])
        from alfworld_api import list_games, run_episodes
        games = list_games(sys.argv[1])[:2]
        plans = {g["id"]: list(g["expert_actions"]) for g in games}
        def generate(prompts):
            # the runner keeps prompts in game order: pop each live game's next expert action
            live = [g for g in games if plans[g["id"]]]
            return [plans[g["id"]].pop(0) for g in live]
        res = run_episodes(generate, games, max_steps=20)
        print(json.dumps([[r.won, r.steps] for r in res]))
        assert "autorl_tui" not in sys.modules
    """)
    env = {"PATH": os.environ.get("PATH", ""), "ALFWORLD_DATA": str(alfworld_data), "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", script, str(train)], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    results = json.loads(out.stdout.strip().splitlines()[-1])
    games = items_of(train)[:2]
    assert results == [[True, len(g["expert_actions"])] for g in games]


def test_official_layout_is_used_when_alfworld_data_points_at_it(all_types_train, tmp_path, monkeypatch):
    """Games laid out as `alfworld-download` does (json_2.1.1/<split>/<task>/<trial>/) are picked up:
    train from train (with planner expert data), dev from valid_seen, test from valid_unseen."""
    import shutil
    from autorl_tui.tasks.alfworld.provider import available
    card, train = all_types_train
    items = items_of(train)
    root = tmp_path / "official"
    layout = {"train": items[:2], "valid_seen": items[2:3], "valid_unseen": items[3:5]}
    for split, chosen in layout.items():
        for n, item in enumerate(chosen):
            dest = root / "json_2.1.1" / split / f"{item['task_type']}-X-None-Y-{n}" / "trial_T0001"
            dest.mkdir(parents=True)
            for name in ("game.tw-pddl", "traj_data.json"):
                shutil.copy2((train / item["gamefile"]).with_name(name), dest / name)
    sliced = root / "json_2.1.1" / "valid_unseen" / "pick_and_place_simple-AppleSliced-None-Y-9" / "trial_T1"
    shutil.copytree((train / items[0]["gamefile"]).parent, sliced)   # skipped, as AlfredTWEnv does
    official = small_card(tmp_path, "official", TASK_TYPES, {"train": {"official_n_per_type": 5}, "dev": {},
                                                              "test": {}})
    official.data["params"]["source"] = "official"
    monkeypatch.setenv("ALFWORLD_DATA", str(root))
    assert available(official) is None
    got = {s: items_of(materialize(official, s, tmp_path / "cache")) for s in ("train", "dev", "test")}
    assert [len(got[s]) for s in ("train", "dev", "test")] == [2, 1, 2]
    assert all(i["source"] == "official" for v in got.values() for i in v)
    assert {i["task_type"] for i in got["test"]} == {i["task_type"] for i in layout["valid_unseen"]}
    assert got["train"][0]["expert_actions"] == items[0]["expert_actions"]
    assert any((tmp_path / "cache").rglob("sft_chat.jsonl"))


def test_official_source_without_the_data_says_how_to_get_it(alfworld_data, tmp_path, monkeypatch):
    from autorl_tui.catalog.tasks import DataUnavailable
    from autorl_tui.tasks.alfworld.provider import available
    card = small_card(tmp_path, "official-missing", TASK_TYPES, {"train": {}, "dev": {}, "test": {}})
    card.data["params"]["source"] = "official"
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "empty"))
    assert "json_2.1.1" in available(card)
    with pytest.raises(DataUnavailable, match="run `alfworld-download` with ALFWORLD_DATA set to a folder"):
        materialize(card, "dev", tmp_path / "cache")
    assert not list((tmp_path / "cache").rglob("items.jsonl"))      # nothing half-written


def test_workspace_gets_the_train_split_and_nothing_held_out(three_splits, tmp_path):
    """The engine's workspace builder places the train folder as data/: games, SFT data, API;
    no dev or test game is anywhere in the workspace."""
    from autorl_tui.engine.workspace import build_workspace
    card, paths = three_splits
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    build_workspace(tmp_path / "ws", card=card, model_name="m", model_path=model, train_path=paths["train"],
                    link=False)
    data = tmp_path / "ws" / "data"
    assert (data / "items.jsonl").exists() and (data / "alfworld_api" / "api.py").exists()
    assert (data / "sft_prompt_completion.jsonl").exists() and (data / "few_shot").is_dir()
    names = {p.name for p in (tmp_path / "ws").rglob("*")}
    for split in ("dev", "test"):
        for item in items_of(paths[split]):
            assert item["id"] not in names


def test_tiny_alfworld_reads_every_game_word_and_fits_a_turn(three_splits, all_types_train):
    """The built-in `tiny-alfworld` tokenizer is made from the engine's text, not from any split:
    every word of every split's games (held-out rooms too) is in it, and a whole turn fits its context."""
    from autorl_tui.tasks.alfworld.tiny_model import MAX_POSITIONS, build_tokenizer

    tok = build_tokenizer()
    unk = tok.unk_token_id
    _, splits = three_splits
    texts = []
    for split_dir in [*splits.values(), all_types_train[1]]:
        for item in items_of(split_dir):
            expert = json.loads((split_dir / item["gamefile"]).with_name("expert.json").read_text())
            texts.append(expert["intro"])
            texts += [s["feedback"] + "\n" + ", ".join(s["admissible"]) for s in expert["steps"]]
    assert len(texts) > 20
    for text in texts:
        assert unk not in tok(text, add_special_tokens=False)["input_ids"], text
    rows = [json.loads(x) for x in (all_types_train[1] / "sft_prompt_completion.jsonl").read_text().splitlines()]
    lengths = [len(tok(tok.apply_chat_template(r["prompt"] + r["completion"], tokenize=False),
                       add_special_tokens=False)["input_ids"]) for r in rows]
    assert max(lengths) + 48 <= MAX_POSITIONS, max(lengths)
    assert tok.decode(tok("take apple 1 from countertop 2")["input_ids"]) == "take apple 1 from countertop 2"


def test_tiny_alfworld_build_is_deterministic_and_plays_as_a_policy(all_types_train, tmp_path):
    from autorl_tui.catalog.model_builds import weights_hash
    from autorl_tui.tasks.alfworld.tiny_model import build_tiny_alfworld_model
    from autorl_tui.grading.inference import TransformersPolicy

    a = build_tiny_alfworld_model(tmp_path / "a")
    b = build_tiny_alfworld_model(tmp_path / "b")
    c = build_tiny_alfworld_model(tmp_path / "c", seed=1)
    assert weights_hash(a) == weights_hash(b) != weights_hash(c)
    card, train = all_types_train
    policy = TransformersPolicy(a, prompt_format="chat", batch_size=8)
    res = evaluate(card, train, policy, max_steps=2)
    assert res.metrics["episodes"] == len(items_of(train)) and res.metrics["errors"] == 0
    assert res.score == 0.0          # untrained: the floor


def room_places(intro: str) -> list[str]:
    return [p.strip().removeprefix("and ").removeprefix("a ").removeprefix("an ")
            for p in intro.split("you see ", 1)[1].split(".")[0].split(",")]


def test_reference_collect_writes_reactive_trajectories_that_win(all_types_train, alfworld_data, tmp_path):
    """The reference agent's online collection (run as in a workspace: DATA_PATH = the train split)
    writes SFT examples in the grader's prompt format, for episodes from the start and after random
    moves; replaying each episode wins in the engine. The expert's choices follow from the prompt:
    searches go through the room list in order from where it stands, and the object goes to the
    first place of the needed type in the room list."""
    from autorl_tui.tasks.alfworld.game import AlfworldGame
    from autorl_tui.tasks.alfworld.prompts import build_messages

    _, train = all_types_train
    script = REPO / "autorl_tui" / "builtin" / "agents" / "reference" / "pipeline" / "alfworld_collect.py"
    out = tmp_path / "collected.jsonl"
    env = {"PATH": os.environ.get("PATH", ""), "ALFWORLD_DATA": str(alfworld_data), "HOME": str(tmp_path),
           "DATA_PATH": str(train)}
    proc = subprocess.run([sys.executable, str(script), "--out", str(out), "--variants", "2"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    games = items_of(train)
    assert summary["examples"] == len(rows) > 0
    assert summary["tried"] == 2 * len(games) and summary["episodes"] >= 2 * len(games) - 1
    episodes: dict = {}
    for row in rows:
        episodes.setdefault((row["game_id"], row["variant"]), []).append(row)
    assert len(episodes) == summary["episodes"] and {v for _, v in episodes} == {0, 1}
    items = {i["id"]: i for i in games}
    needs = {"pick_clean_then_place_in_recep": "sinkbasin", "pick_heat_then_place_in_recep": "microwave",
             "pick_cool_then_place_in_recep": "fridge"}
    for (game_id, variant), play in episodes.items():
        item = items[game_id]
        first_user = play[0]["prompt"][1]["content"]
        prefix = [line[2:] for line in first_user.splitlines() if line.startswith("> ")]
        assert (len(prefix) == 0) == (variant == 0) and len(prefix) <= 4
        assert all(a.startswith("go to ") for a in prefix)
        game = AlfworldGame(str(train / item["gamefile"]))
        try:
            obs = game.reset()
            intro, history = obs.text, []
            room = room_places(intro)
            for action in prefix:
                obs = game.step(action)
                history.append((action, obs.text))
            here = prefix[-1][6:] if prefix else None
            holding, walked_since_take = False, 0
            for row in play:
                assert row["prompt"] == build_messages(intro, history, obs.admissible, task_type=item["task_type"])
                action = row["completion"][0]["content"]
                if action.startswith("go to ") and not holding:      # searching: the next place in the list
                    expected = room[(room.index(here) + 1) % len(room)] if here else room[0]
                    assert action[6:] == expected, (game_id, here, action)
                if action.startswith("go to ") and holding:
                    walked_since_take += 1
                    if walked_since_take == 1 and item["task_type"] in needs:   # the appliance comes first
                        kind = needs[item["task_type"]]
                        assert action[6:] == next(p for p in room if p.rsplit(" ", 1)[0] == kind), (game_id, action)
                if action.startswith("take "):
                    assert action.split()[1] in item["goal"].split() or action.split()[1] + "." in item["goal"]
                    holding, walked_since_take = True, 0
                if action.startswith("move "):
                    holding = False
                if action.startswith("go to "):
                    here = action[6:]
                obs = game.step(action)
                history.append((action, obs.text))
            assert obs.won, (game_id, variant, history)
        finally:
            game.close()


def run_pipeline_script(name, args, train, alfworld_data, cwd):
    script = REPO / "autorl_tui" / "builtin" / "agents" / "reference" / "pipeline" / name
    env = {"PATH": os.environ.get("PATH", ""), "ALFWORLD_DATA": str(alfworld_data), "HOME": str(cwd),
           "DATA_PATH": str(train), "PIPELINE_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_reference_dagger_labels_the_states_the_model_reaches(all_types_train, alfworld_data, tmp_path):
    """DAgger plays the train games with the model as the grader would and the expert labels every
    state. When the expert's command is always carried out (beta 1) the labelled episodes are the
    expert's own: the same prompts and answers as the collection writes, and every game is won. With
    an untrained model in charge (beta 0) nothing is won, and each state still gets the expert's
    label, in the grader's prompt for the history the model made."""
    from autorl_tui.tasks.alfworld.tiny_model import build_tiny_alfworld_model
    from autorl_tui.tasks.alfworld.prompts import build_messages

    _, train = all_types_train
    model = build_tiny_alfworld_model(tmp_path / "model")
    games = items_of(train)
    expert = run_pipeline_script("alfworld_collect.py", ["--out", str(tmp_path / "expert.jsonl"), "--variants", "1"],
                                 train, alfworld_data, tmp_path)
    led = run_pipeline_script("alfworld_dagger.py", ["--model", str(model), "--out", str(tmp_path / "led.jsonl"),
                                                     "--beta", "1", "--max_steps", "40"], train, alfworld_data, tmp_path)
    assert led["played"] == len(games) and led["won"] == expert["episodes"] == len(games), led
    pairs = lambda path: sorted((r["game_id"], json.dumps(r["prompt"]), r["completion"][0]["content"])  # noqa: E731
                                for r in map(json.loads, path.read_text().splitlines()))
    assert pairs(tmp_path / "led.jsonl") == pairs(tmp_path / "expert.jsonl")

    alone = run_pipeline_script("alfworld_dagger.py", ["--model", str(model), "--out", str(tmp_path / "alone.jsonl"),
                                                       "--beta", "0", "--max_steps", "3"], train, alfworld_data, tmp_path)
    rows = [json.loads(x) for x in (tmp_path / "alone.jsonl").read_text().splitlines()]
    assert alone["played"] == len(games) and alone["won"] == 0 and alone["examples"] == len(rows) == 3 * len(games)
    by_game = {i["id"]: i for i in games}
    for row in rows:
        user = row["prompt"][1]["content"]
        label = row["completion"][0]["content"]
        assert label in user.split("Available commands: ")[1].split("\n")[0].split(", "), (label, user[-600:])
        if "\n> " not in user:              # the first state: the search starts at the first listed place
            intro = user.split("\n\nAvailable commands:")[0]
            assert row["prompt"] == build_messages(intro, [], user.split("Available commands: ")[1]
                                                   .split("\n")[0].split(", "),
                                                   task_type=by_game[row["game_id"]]["task_type"])
            assert label == "go to " + room_places(intro)[0]


def test_reference_sft_renames_objects_consistently(all_types_train):
    """A renamed copy keeps the example coherent: the object the answer names is, after renaming,
    still the goal's object and still an available command; receptacles keep their names."""
    import importlib.util

    _, train = all_types_train
    path = REPO / "autorl_tui" / "builtin" / "agents" / "reference" / "pipeline" / "alfworld_sft.py"
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location("alfworld_sft_under_test", path)
        sft = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sft)
    finally:
        sys.path.remove(str(path.parent))
    data = train / "sft_prompt_completion.jsonl"
    plain = sft.load_examples([str(data)], seed=0)
    rows = sft.load_examples([str(data)], seed=0, rename=1)
    assert len(rows) == 2 * len(plain)
    originals = {json.dumps(r["completion"]) + r["prompt"][-1]["content"] for r in plain}
    renamed = [r for r in rows if json.dumps(r["completion"]) + r["prompt"][-1]["content"] not in originals]
    assert len(renamed) >= len(plain) * 0.9       # the rest mention no takeable object at all
    takes = [r for r in renamed if r["completion"][0]["content"].startswith("take ")]
    assert takes
    for r in takes:
        user, answer = r["prompt"][-1]["content"], r["completion"][0]["content"]
        obj = answer.split()[1]
        goal = user.split("Your task is to:")[1].split("\n")[0]
        assert obj in goal.split() or obj + "." in goal.split(), (goal, answer)
        assert answer in user.split("Available commands: ")[1]
        assert r["prompt"][0] == plain[0]["prompt"][0]     # the system message is untouched
