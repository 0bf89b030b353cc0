"""Checks a task card thoroughly and reports every problem with how to fix it.

Used by `autorl-tui tasks validate`. Unlike `load_task_card` (which stops at the first
problem), this collects all of them: fields, level, scorer, protocol, description, data
provider, every split materialized, item ids, and disjointness of splits by id and by content.
A folder-shaped split (interactive tasks) is checked through its `items.jsonl` index when it has
one; what only the task knows it checks itself: `check_split(card, split, path)` in its `python`
provider's module, and its scorer's (and environment's) `validate_options`.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from autorl_tui import registry
from autorl_tui.catalog.protocol import OVERRIDE_KEYS, EvalProtocol, card_protocols
from autorl_tui.catalog.tasks import (HELD_OUT_SPLITS, REQUIRED, DataUnavailable, TaskCard, load_task_card,
                                      local_data_root, materialize, provider_data_missing, provider_module,
                                      read_items)
from autorl_tui.exitcodes import UsageError

PROVIDERS = ("generator", "files", "local", "python")
REQUIRED_SPLITS = ("train", "dev", "test")
# Protocol fields a card must state explicitly (the defaults would silently decide the numbers).
PROTOCOL_EXPLICIT = ("prompt_format", "temperature", "max_tokens")


@dataclass
class Problem:
    what: str
    fix: str

    def __str__(self) -> str:
        return f"{self.what}\n    fix: {self.fix}"


@dataclass
class Report:
    card_path: Path
    problems: list[Problem]
    split_sizes: dict[str, int]
    card: TaskCard | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def _content_key(item: dict) -> str:
    """What identifies an item's content: its prompt (whitespace-normalized), else all but its id."""
    prompt = item.get("prompt") if isinstance(item.get("prompt"), str) else item.get("question")
    if isinstance(prompt, str):           # `question`: a benchmark's own row shape (GSM8K, AutoRL-Bench's HumanEval)
        text = " ".join(prompt.split())
    else:
        text = json.dumps({k: v for k, v in item.items() if k not in ("id", "answer")}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def data_available(card: TaskCard) -> tuple[bool, str]:
    """Cheap check (no materializing) whether the card's data is on this machine."""
    provider = card.data.get("provider", "files")
    splits = card.data.get("splits") or {}
    if provider == "files":
        missing = [str(card.dir / s["path"]) for s in splits.values() if isinstance(s, dict) and s.get("path")
                   and not (card.dir / s["path"]).exists()]
        return (not missing, "missing " + ", ".join(missing) if missing else "shipped files")
    if provider == "local":
        root = local_data_root(card)
        get = f"`autorl-tui data get {card.id}`, " if card.data.get("official") else ""
        return (root is not None, str(root) if root else
                f"not found ({get}set ${card.data.get('env')} or put it in {card.data.get('default')})")
    if provider == "generator":
        return True, f"generated ({card.data.get('generator')})"
    if provider == "python":
        try:
            module = provider_module(card)
        except (LookupError, ValueError, ImportError, AttributeError) as exc:
            return False, f"provider function not importable: {exc}"
        if getattr(module, "available", None) is None:
            return True, "python provider"
        why = provider_data_missing(card)
        return (why is None, why or "python provider")
    return False, f"unknown provider {provider!r}"


def validate_card(path: Path, cache_root: Path | None = None, data_home: Path | None = None) -> Report:
    card_path = path / "task.yaml" if path.is_dir() else path
    problems: list[Problem] = []
    sizes: dict[str, int] = {}
    try:
        raw = yaml.safe_load(card_path.read_text())
    except FileNotFoundError:
        return Report(card_path, [Problem(f"{card_path} does not exist",
                                          "give the task's folder (holding task.yaml) or the task.yaml itself")], sizes)
    except yaml.YAMLError as exc:
        return Report(card_path, [Problem(f"not valid YAML: {exc}", "fix the YAML syntax at the position shown")], sizes)
    if not isinstance(raw, dict):
        return Report(card_path, [Problem(f"the card is a {type(raw).__name__}, not a mapping of fields",
                                          f"write the fields {', '.join(REQUIRED)} as `key: value` lines")], sizes)
    for key in REQUIRED:
        if key not in raw:
            problems.append(Problem(f"required field `{key}` is missing", _FIELD_HELP[key]))
    if "protocol" not in raw and "protocols" not in raw:
        problems.append(Problem("required field `protocol` is missing", _FIELD_HELP["protocol"]))
    if "id" in raw and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", str(raw["id"])):
        problems.append(Problem(f"id {raw['id']!r} has characters other than letters, digits, '-', '_', '.'",
                                "use a short slug such as my-task"))
    if "id" in raw and card_path.parent.name != str(raw["id"]):
        problems.append(Problem(f"id {raw['id']!r} differs from its folder name {card_path.parent.name!r}; "
                                "`find_task` looks tasks up by folder", f"rename the folder to {raw['id']} or change the id"))
    if "level" in raw and raw["level"] not in (1, 2, 3):
        problems.append(Problem(f"level is {raw['level']!r}", "level must be 1 (static, rule-scored), 2 (judge-scored) "
                                                               "or 3 (interactive)"))
    scorer_obj = None
    if "scorer" in raw:
        name = str(raw["scorer"])
        if name not in registry.entries("scorers") and ":" not in name:
            problems.append(Problem(f"scorer {raw['scorer']!r} is not known",
                                    f"use one of: {', '.join(registry.names('scorers'))} "
                                    f"(built-ins: autorl_tui/registry.py; plugins: entry points `autorl_tui.scorers`), "
                                    "or a class of the task's folder as module:Class (scoring:MyScorer = scoring.py)"))
        else:
            try:
                scorer_obj = registry.resolve("scorers", name, card_path.parent.resolve())()
            except Exception as exc:  # noqa: BLE001 - a broken scorer module is a problem to report
                problems.append(Problem(f"scorer {raw['scorer']!r} failed to load: {type(exc).__name__}: {exc}",
                                        "fix the scorer's module or install its dependencies (pip install -e .[tasks])"))
    problems += _check_protocol(raw)
    check_options = getattr(scorer_obj, "validate_options", None)
    if check_options is not None and isinstance(raw.get("scorer_options") or {}, dict):
        problems += [Problem(what, fix) for what, fix in check_options(dict(raw.get("scorer_options") or {}),
                                                                        card_path.parent.resolve())]
    desc = card_path.parent / str(raw.get("description", "description.md"))
    if not desc.exists() or not desc.read_text().strip():
        problems.append(Problem(f"agent-visible description {desc.name} is missing or empty",
                                f"write {desc} (what the task is, how it is scored, the train data's layout)"))
    data = raw.get("data")
    if "data" in raw and not isinstance(data, dict):
        problems.append(Problem("`data` is not a mapping", "see docs/tasks.md for the data section"))
        data = None
    for name in raw.get("workspace_files") or []:
        if not (card_path.parent / name).exists():
            problems.append(Problem(f"workspace file {name} does not exist beside the card", "add it or drop it from workspace_files"))
        if any(h in str(name) for h in ("dev", "test", "private")):
            problems.append(Problem(f"workspace file {name} looks like held-out data (it would be copied into every workspace)",
                                    "only train data and helpers may be agent-visible; rename it if it is not held-out data"))
    card = None
    if not problems:
        try:
            card = load_task_card(card_path, data_home=data_home)
        except UsageError as exc:
            problems.append(Problem(str(exc), "see docs/tasks.md"))
    if data is not None:   # check the data even when other fields are wrong: report everything at once
        problems += _check_data(card or _lenient_card(raw, card_path), scorer_obj, sizes, cache_root)
    return Report(card_path, problems, sizes, card)


def _lenient_card(raw: dict, card_path: Path) -> TaskCard:
    """A TaskCard built from a card with problems, good enough to materialize its data."""
    try:
        protocol = EvalProtocol.from_dict(raw.get("protocol") if isinstance(raw.get("protocol"), dict) else {})
    except (TypeError, ValueError):
        protocol = EvalProtocol()
    return TaskCard(id=str(raw.get("id", card_path.parent.name)), name=str(raw.get("name", "")),
                    level=raw.get("level") if isinstance(raw.get("level"), int) else 0,
                    scorer=str(raw.get("scorer", "")), primary_metric=str(raw.get("primary_metric", "")),
                    protocol=protocol, data=dict(raw["data"]), dir=card_path.parent.resolve(),
                    scorer_options=dict(raw.get("scorer_options") or {}), version=str(raw.get("version", "1")), raw=raw)


def _check_protocol(raw: dict) -> list[Problem]:
    """The card's protocol, or each of its named protocols (`protocols:`, less what they override)."""
    if "protocols" not in raw:
        return _check_one_protocol(raw)
    try:
        named, _ = card_protocols(raw)
    except ValueError as exc:
        return [Problem(f"protocols: {exc}", "see docs/tasks.md, named protocols")]
    problems = []
    for name, fields in named.items():
        proto = {k: v for k, v in fields.items() if k not in OVERRIDE_KEYS}
        problems += [Problem(f"protocols.{name}: {p.what}", p.fix) for p in _check_one_protocol({"protocol": proto})]
    return problems


def _check_one_protocol(raw: dict) -> list[Problem]:
    problems = []
    proto = raw.get("protocol")
    if "protocol" not in raw:
        return problems
    if not isinstance(proto, dict):
        return [Problem("`protocol` is not a mapping", "write protocol: {prompt_format: chat, temperature: 0.0, max_tokens: 256, n: 1}")]
    try:
        p = EvalProtocol.from_dict(proto)
    except (TypeError, ValueError) as exc:
        return [Problem(f"protocol: {exc}", "remove or rename the unknown field(s)")]
    for key in PROTOCOL_EXPLICIT:
        if key not in proto:
            problems.append(Problem(f"protocol does not state `{key}` (the default would decide the numbers silently)",
                                    f"add protocol.{key} (default: {getattr(EvalProtocol(), key)!r})"))
    if p.prompt_format not in ("chat", "plain"):
        problems.append(Problem(f"protocol.prompt_format is {p.prompt_format!r}", "use chat or plain"))
    if not isinstance(p.temperature, (int, float)) or p.temperature < 0:
        problems.append(Problem(f"protocol.temperature is {p.temperature!r}", "use a number >= 0 (0 = greedy)"))
    if not isinstance(p.top_p, (int, float)) or not 0 < p.top_p <= 1:
        problems.append(Problem(f"protocol.top_p is {p.top_p!r}", "use a number in (0, 1]"))
    if not isinstance(p.n, int) or p.n < 1:
        problems.append(Problem(f"protocol.n is {p.n!r}", "use an integer >= 1 (samples per prompt)"))
    if not isinstance(p.max_tokens, int) or p.max_tokens < 1:
        problems.append(Problem(f"protocol.max_tokens is {p.max_tokens!r}", "use an integer >= 1"))
    ks = p.k if isinstance(p.k, list) else [p.k]
    bad_k = [k for k in ks if not isinstance(k, int) or k < 1 or (isinstance(p.n, int) and k > p.n)]
    if bad_k:
        problems.append(Problem(f"protocol.k has {bad_k}: pass@k needs 1 <= k <= n (n = {p.n})", "raise n or drop those k"))
    if isinstance(p.n, int) and p.n > 1 and p.temperature == 0:
        problems.append(Problem("protocol.n > 1 with temperature 0: every sample is identical",
                                "set temperature > 0 (e.g. 0.8) for n > 1, or n: 1"))
    if raw.get("level") == 3 and not p.max_steps:
        problems.append(Problem("interactive (level 3) task without protocol.max_steps", "add protocol.max_steps"))
    return problems


def _check_data(card: TaskCard, scorer_obj, sizes: dict, cache_root: Path | None) -> list[Problem]:
    problems: list[Problem] = []
    provider = card.data.get("provider", "files")
    if provider not in PROVIDERS:
        return [Problem(f"data provider {provider!r} is not known", f"use one of {', '.join(PROVIDERS)}")]
    function = str(card.data.get("function", ""))
    if provider == "python" and ":" not in function and function not in registry.entries("data_providers"):
        return [Problem("python provider without `data.function: NAME` (a registered data provider) or "
                        "`module:function`",
                        f"add data.function: one of {', '.join(registry.names('data_providers'))}, or e.g. "
                        "mypkg.data:materialize (called as f(card, split, out_dir) -> Path)")]
    if provider == "generator" and not card.data.get("generator"):
        return [Problem("generator provider without `data.generator`",
                        f"name a registered generator: {', '.join(registry.names('generators'))}")]
    splits = card.data.get("splits")
    if not isinstance(splits, dict) or not splits:
        return [Problem("data.splits is missing or empty", "declare train, dev and test splits (see docs/tasks.md)")]
    for name in REQUIRED_SPLITS:
        if name not in splits:
            problems.append(Problem(f"split `{name}` is not declared",
                                    {"train": "train is what the agent learns from (mounted read-only)",
                                     "dev": "dev is scored on every submission",
                                     "test": "test is the held-out split scored once at the end"}[name]
                                    + f"; add data.splits.{name}"))
    item_fields = tuple(getattr(scorer_obj, "item_fields", ()) or ("id",))
    contents: dict[str, dict[str, str]] = {}
    ids: dict[str, set] = {}
    tmp = None
    if cache_root is None:
        tmp = tempfile.TemporaryDirectory(prefix="autorl-validate-")
        cache_root = Path(tmp.name)
    try:
        for split in splits:
            try:
                path = materialize(card, split, cache_root)
            except DataUnavailable as exc:
                problems.append(Problem(f"split {split}: data not available: {exc}", "put the data where the message says"))
                continue
            except (UsageError, KeyError, OSError, ValueError, ImportError, AttributeError, TypeError) as exc:
                problems.append(Problem(f"split {split} failed to materialize: {type(exc).__name__}: {exc}",
                                        "check data.splits and the provider's settings (docs/tasks.md)"))
                continue
            problems += _provider_checks(card, split, path)
            if path.is_dir():   # a folder-shaped split (interactive tasks): its index gets the item checks
                if not (path / "items.jsonl").is_file():
                    sizes[split] = sum(1 for _ in path.iterdir())
                    continue
                path = path / "items.jsonl"
            try:
                items = read_items(path)
            except UsageError as exc:
                problems.append(Problem(f"split {split}: {exc}", "every line must be one JSON object"))
                continue
            sizes[split] = len(items)
            if not items:
                problems.append(Problem(f"split {split} is empty", "give it at least one item"))
                continue
            seen: set = set()
            dups, lacking = [], {}
            contents[split] = {}
            # `rows: benchmark`: the agent's rows in the benchmark's own shape (never scored)
            fields = () if (splits.get(split) or {}).get("rows") == "benchmark" else item_fields
            for n, item in enumerate(items, 1):
                if not isinstance(item, dict):
                    problems.append(Problem(f"split {split} item {n} is not a JSON object", "one object per line"))
                    break
                for f in fields:
                    if f not in item:
                        lacking.setdefault(f, []).append(str(item.get("id", f"#{n}")))
                if "id" in item:
                    if item["id"] in seen:
                        dups.append(item["id"])
                    seen.add(item["id"])
                contents[split].setdefault(_content_key(item), str(item.get("id", f"#{n}")))
            ids[split] = seen
            for f, which in lacking.items():
                problems.append(Problem(f"split {split}: {len(which)} item(s) lack `{f}` (e.g. {', '.join(which[:3])})",
                                        f"scorer {card.scorer} needs {', '.join(item_fields)} in every item"))
            if dups:
                problems.append(Problem(f"split {split}: duplicate ids {dups[:5]}", "give every item a unique id"))
    finally:
        if tmp is not None:
            tmp.cleanup()
    names = list(contents)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if (splits.get(a) or {}).get("overlaps") == b or (splits.get(b) or {}).get("overlaps") == a:
                continue          # declared: e.g. a dev split drawn from train (the protocol's own partition)
            shared = ids.get(a, set()) & ids.get(b, set())
            if shared:
                problems.append(Problem(f"splits {a} and {b} share {len(shared)} id(s), e.g. {sorted(map(str, shared))[:3]}",
                                        "each item belongs to exactly one split"))
            same = set(contents[a]) & set(contents[b])
            if same:
                eg = [f"{contents[a][h]} = {contents[b][h]}" for h in list(same)[:3]]
                severity = " (held-out content is visible to the agent)" if a in ("train",) and b in (*HELD_OUT_SPLITS, "dev") else ""
                problems.append(Problem(f"splits {a} and {b} share {len(same)} item(s) with the same content{severity}: {', '.join(eg)}",
                                        "remove the duplicates from one of the splits"))
    return problems


def _provider_checks(card: TaskCard, split: str, path: Path) -> list[Problem]:
    """The task's own checks of a materialized split: `check_split(card, split, path) -> [(what,
    fix)]` in the `python` provider's module (beside `available` and `source_fingerprint`)."""
    if card.data.get("provider") != "python":
        return []
    try:
        check = getattr(provider_module(card), "check_split", None)
        found = check(card, split, path) if check is not None else []
    except Exception as exc:  # noqa: BLE001 - a failing check is a problem to report, not a crash
        return [Problem(f"split {split}: the task's check_split failed: {type(exc).__name__}: {exc}",
                        "fix check_split in the provider's module")]
    return [Problem(f"split {split}: {what}", fix) for what, fix in found]


_FIELD_HELP = {
    "id": "add `id: my-task` (the folder's name)",
    "level": "add `level: 1` (static, rule-scored), 2 (judge-scored) or 3 (interactive)",
    "scorer": "add `scorer: NAME`, one of the registered scorers (`autorl-tui tasks` lists those in use)",
    "primary_metric": "add `primary_metric: NAME`, the scorer metric reported as the score (e.g. accuracy, pass@1, win_rate)",
    "protocol": "add `protocol: {prompt_format: chat, temperature: 0.0, max_tokens: 256, n: 1}`",
    "data": "add a data section with a provider and train/dev/test splits (docs/tasks.md)",
}
