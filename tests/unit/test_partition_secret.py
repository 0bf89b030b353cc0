"""Issue 31: WebShop's partition is secret to the harness. The agent's workspace holds the catalog
(train/catalog.jsonl, every product) and the docs once printed the rule: shuffle the products
sorted by asin with `random.Random(partition_seed)` and cut by `fractions`. With the home's secret
that rule no longer names the held-out targets; two runs of one home still share the partition."""

import json
import os
import random
import stat

import yaml

from autorl_tui.catalog import partition_secret
from autorl_tui.catalog.tasks import load_task_card, materialize, split_cache_dir
from autorl_tui.tasks.webshop.provider import DEFAULT_FRACTIONS
from tests.unit.test_webshop_env import CARD


def _card(tmp_path):
    raw = yaml.safe_load(CARD.read_text())
    raw["data"]["params"].update(source="generated", per_type=6)
    raw["data"]["splits"] = {"train": {"n": 60, "seed": 1}, "dev": {"n": 12, "seed": 2}, "test": {"n": 24, "seed": 3}}
    (tmp_path / "task.yaml").write_text(yaml.safe_dump(raw))
    return load_task_card(tmp_path / "task.yaml")


def _targets(split_dir):
    return {json.loads(line)["asin"] for line in (split_dir / "items.jsonl").read_text().splitlines()}


def _old_rule(catalog, seed, fractions):
    """The documented rule with the card's default seed, from what the agent sees."""
    order = sorted(catalog, key=lambda p: p["asin"])
    random.Random(seed).shuffle(order)
    parts, start = {}, 0
    for i, split in enumerate(fractions):
        end = len(order) if i == len(fractions) - 1 else start + int(round(fractions[split] * len(order)))
        parts[split] = {p["asin"] for p in order[start:end]}
        start = end
    return parts


def test_the_held_out_targets_cannot_be_derived_from_the_workspace_and_the_rule(tmp_path):
    card = _card(tmp_path)
    cache = tmp_path / "home" / "cache" / "tasks"
    splits = {s: materialize(card, s, cache) for s in ("train", "dev", "test")}
    secret_file = partition_secret.secret_path(cache)
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600 and len(secret_file.read_text()) == 64
    catalog = [json.loads(line) for line in (splits["train"] / "catalog.jsonl").read_text().splitlines()]
    seed = int(card.data["params"].get("partition_seed", 0))
    guessed = _old_rule(catalog, seed, DEFAULT_FRACTIONS)
    for split in ("dev", "test"):
        real = _targets(splits[split])
        assert real and not real <= guessed[split], split          # the old rule no longer names them
    assert not _targets(splits["train"]) & (_targets(splits["dev"]) | _targets(splits["test"]))   # still disjoint
    # the secret is in the protocol hash as a commitment only
    assert secret_file.read_text() not in split_cache_dir(card, cache).name
    other_home = tmp_path / "other" / "cache" / "tasks"
    assert split_cache_dir(card, other_home) != split_cache_dir(card, cache)


def test_two_runs_in_one_home_share_the_partition_and_a_test_home_can_fix_it(tmp_path):
    card = _card(tmp_path)
    cache = tmp_path / "home" / "cache" / "tasks"
    first = _targets(materialize(card, "test", cache))
    key = split_cache_dir(card, cache)
    for done in key.glob(".*.done"):            # a second run, its split built again from scratch
        os.unlink(done)
    assert _targets(materialize(card, "test", cache)) == first and split_cache_dir(card, cache) == key
    fixed = []
    for home in ("a", "b"):                      # two test homes with the same fixed secret agree
        root = tmp_path / home / "cache" / "tasks"
        root.mkdir(parents=True)
        partition_secret.secret_path(root).write_text("ab" * 32)
        fixed.append((_targets(materialize(card, "test", root)), split_cache_dir(card, root).name))
    assert fixed[0] == fixed[1]
