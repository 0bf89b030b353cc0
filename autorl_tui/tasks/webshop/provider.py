"""Data provider for the `webshop` task card: `materialize(card, split, out_dir) -> Path`.

A materialized split is a folder:

    <split>/catalog.jsonl   every product of the shop (all splits shop in the same catalog)
    <split>/items.jsonl     one instruction (goal) per line: id, instruction, target asin, attributes,
                            goal_options, price_upper, category

and, for `train` only (the split copied into the agent's workspace): the expert's trajectories
(`expert_trajectories.jsonl`) and SFT data in the grader's prompt format (`sft_chat.jsonl`,
`sft_prompt_completion.jsonl`), the episode runner `webshop_api/`, and a README.md.

The catalog is generated (catalog.py) unless the official data is present ($WEBSHOP_DATA, see
official.py) and `params.source` is `auto` or `official`. With `params.episodes: sessions` (the
`webshop` card) the items are WebShop's sessions instead (`session_items`, webagent.py: test = sessions
0..n-1, as AutoRL-Bench) and each split holds the official files in `webshop_data/`, not catalog.jsonl.
Either way the splits' goals come from disjoint target products: the products are shuffled with a seed drawn from `params.partition_seed`
keyed with the home's partition secret (catalog/partition_secret.py: the agent cannot recompute the
held-out targets from the catalog) and divided by `params.fractions`.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
from pathlib import Path

from autorl_tui.catalog import partition_secret
from autorl_tui.tasks.webshop import catalog as C
from autorl_tui.tasks.webshop.official import load_official, official_root
from autorl_tui.tasks.webshop.webagent import shop_at
from autorl_tui.tasks import kit

_log = logging.getLogger(__name__)
PACKAGE_DIR = Path(__file__).resolve().parent
# the workspace's webshop_api/: these files beside the grader's generic runner (tasks/kit.py)
API_FILES = ("api.py", "experts.py", "prompts.py", "reward.py", "search.py", "shop.py", "webagent.py", "lucene.py",
             "porter.py", "react_prompt.py")
DEFAULT_FRACTIONS = {"train": 0.7, "dev": 0.1, "test": 0.2}
SESSION_DATA = "webshop_data"    # a sessions split's copy of the official files
SECRET_PARTITION = True     # the protocol hash records the home's partition-secret commitment


class WebshopDataError(RuntimeError):
    pass


def _source(card) -> str:
    params = card.data.get("params") or {}
    source = params.get("source", "auto")
    if source not in ("auto", "generated", "official"):
        raise WebshopDataError(f"task {card.id}: data.params.source must be auto, generated or official, got {source!r}")
    if params.get("episodes", "human") not in ("human", "sessions"):
        raise WebshopDataError(f"task {card.id}: data.params.episodes must be human (the human goals of our own "
                               f"partition) or sessions (AutoRL-Bench's), got {params.get('episodes')!r}")
    return source


def _sessions(card) -> bool:
    return (card.data.get("params") or {}).get("episodes") == "sessions" and _source(card) != "generated"


def _official_root(card) -> Path | None:
    home = getattr(card, "data_home", None)
    return official_root(Path(home) / card.id if home is not None else None)


def available(card) -> str | None:
    try:
        source = _source(card)
    except WebshopDataError as exc:         # a card's bad params: said in one line at validation
        return str(exc)
    if source == "official" and _official_root(card) is None:
        return (f"task {card.id} needs the official WebShop data and none was found: run `autorl-tui data get "
                f"{card.id}`, or set WEBSHOP_DATA to a folder holding items_shuffle*.json and items_human_ins.json; "
                "for the offline stand-in use the task webshop-mini")
    return None


def source_fingerprint(card) -> str:
    root = _official_root(card) if _source(card) != "generated" else None
    return f"official:{root.resolve()}" if root is not None else ""


def build_split(card, split: str, secret: bytes) -> tuple[list[dict], list[dict]]:
    """(products, the split's goals); `secret` is the home's partition secret."""
    params = dict(card.data.get("params") or {})
    partition_seed = partition_secret.keyed_seed(secret, card.id, int(params.get("partition_seed", 0)))
    source = _source(card)
    root = _official_root(card) if source != "generated" else None
    if source == "official" and root is None:
        raise WebshopDataError(available(card))
    fractions = dict(params.get("fractions") or DEFAULT_FRACTIONS)
    if set(fractions) != set(card.data["splits"]):
        raise WebshopDataError(f"task {card.id}: data.params.fractions names {sorted(fractions)}, "
                               f"the splits are {sorted(card.data['splits'])}: name the same splits")
    spec = dict(card.data["splits"][split])
    n, seed = int(spec.get("n", 50)), int(spec.get("seed", 0))
    if root is not None and params.get("episodes", "human") == "sessions":
        return [], session_items(card, split, partition_seed, root)
    if root is not None:
        products, goals = load_official(root)
        parts = C.partition([p for p in products if any(g["asin"] == p["asin"] for g in goals)],
                            partition_seed, fractions)
        mine = {p["asin"] for p in parts[split]}
        pool = [g for g in goals if g["asin"] in mine]
        random.Random(seed).shuffle(pool)
        return products, [dict(g, id=f"{split}-{g['id']}") for g in pool[:n]]
    per_type, id_chars = int(params.get("per_type", 50)), params.get("id_chars", 8)
    if id_chars not in range(2, 9) or len(C.ID_CHARS) ** id_chars < 2 * per_type * len(C.TYPES):
        raise WebshopDataError(f"task {card.id}: data.params.id_chars must be a whole number from 2 to 8 giving at "
                               f"least twice as many ids as products ({per_type * len(C.TYPES)}), got {id_chars!r}")
    products = C.generate_products(int(params.get("catalog_seed", 0)), per_type, id_chars)
    parts = C.partition(products, partition_seed, fractions)
    return products, C.make_goals(parts[split], n, seed, split)


def session_items(card, split: str, partition_seed: int, root: Path) -> list[dict]:
    """AutoRL-Bench's episodes: `test` is sessions 0..n-1 of WebShop's WebAgentTextEnv (webagent.py);
    the other splits draw sessions whose products no test session buys, the products divided between
    them by the keyed partition seed and `fractions`."""
    params = dict(card.data.get("params") or {})
    num_products, price_seed = params.get("num_products", 1000), int(params.get("price_seed", 0))
    shop = shop_at(root, num_products, price_seed)
    n_test = min(int(card.data["splits"].get("test", {}).get("n", 100)), len(shop.goals))
    spec = dict(card.data["splits"][split])
    if split == "test":
        sessions = list(range(n_test))
    else:
        held = {shop.goals[i]["asin"] for i in range(n_test)}
        products = [{"asin": a} for a in sorted({g["asin"] for g in shop.goals[n_test:]} - held)]
        fractions = {s: f for s, f in (params.get("fractions") or DEFAULT_FRACTIONS).items() if s != "test"}
        total = sum(fractions.values()) or 1.0
        mine = {p["asin"] for p in C.partition(products, partition_seed,
                                               {s: f / total for s, f in fractions.items()})[split]}
        sessions = [i for i in range(n_test, len(shop.goals)) if shop.goals[i]["asin"] in mine]
        random.Random(int(spec.get("seed", 0))).shuffle(sessions)
        sessions = sessions[:int(spec.get("n", 50))]
    out = []
    for i in sessions:
        g = shop.goals[i]
        out.append({"id": f"session-{i}", "session": i, "shop": SESSION_DATA, "num_products": num_products,
                    "price_seed": price_seed, "instruction": g["instruction_text"], "asin": g["asin"],
                    "category": g["category"], "attributes": g["attributes"], "goal_options": g["goal_options"],
                    "price_upper": g["price_upper"]})
    return out


def materialize(card, split: str, out_dir: Path, log=_log.info) -> Path:
    out_dir = Path(out_dir)
    final = out_dir / split
    if (final / "items.jsonl").exists():
        return final
    products, goals = build_split(card, split,
                                  partition_secret.home_secret(partition_secret.cache_root_of(out_dir)))
    work = out_dir / f".{split}.partial"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if any("session" in g for g in goals) or _sessions(card):     # the official files the sessions' shop reads
        (work / SESSION_DATA).mkdir()
        root = _official_root(card)
        if root is None:
            raise WebshopDataError(available(card))
        for stem in ("items_shuffle", "items_ins_v2"):
            found = sorted(root.glob(f"{stem}*.json"))
            shutil.copy2(found[0], work / SESSION_DATA / found[0].name)
    else:
        _write_jsonl(work / "catalog.jsonl", products)
        for g in goals:
            g["catalog"] = "catalog.jsonl"
    _write_jsonl(work / "items.jsonl", goals)
    if split == "train":
        add_workspace_extras(card, work, goals, log)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(work, final)
    return final


def _write_jsonl(path: Path, rows) -> None:
    with open(path, "w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")


def add_workspace_extras(card, split_dir: Path, goals: list[dict], log) -> None:
    from autorl_tui.tasks.webshop.expert_data import write_sft_files
    opts = dict(card.scorer_options or {})
    counts = write_sft_files(split_dir, max_steps=int(card.protocol.max_steps or 15),
                             history_len=int(opts.get("history_len", 8)), prompt=str(opts.get("prompt", "chat")))
    log(f"webshop train: expert won {counts['won']}/{counts['episodes']} episodes, {counts['sft_examples']} steps")
    kit.agent_package(split_dir / "webshop_api", [PACKAGE_DIR / name for name in API_FILES], {
        "api": ["EpisodeResult", "list_episodes", "open_episode", "run_episodes", "summarize_rewards"],
        "experts": ["expert_action"], "prompts": ["build_messages", "messages_to_text", "parse_reply"],
        "reward": ["reward"], "shop": ["Shop", "ShopEpisode"]}, "WebShop episode runner")
    shop = "webshop_data/: WebShop sessions" if (split_dir / SESSION_DATA).is_dir() else "catalog.jsonl"
    (split_dir / "README.md").write_text(
        f"# WebShop train split\n\n{len(goals)} instructions (items.jsonl) over the shop's catalog "
        f"({shop}); the expert's trajectories in expert_trajectories.jsonl ({counts['won']}/"
        f"{counts['episodes']} won) and their {counts['sft_examples']} steps as SFT data (sft_chat.jsonl, "
        "sft_prompt_completion.jsonl); the episode runner in webshop_api/ (see the task description).\n")
