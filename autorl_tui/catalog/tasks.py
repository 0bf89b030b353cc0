"""Task cards: `tasks/<id>/task.yaml` + `description.md` (agent-visible) + data or a generator.

A card fixes the evaluation protocol. Data comes from a *provider* named in the card:

    data:
      provider: generator          # python function producing items for a split
      generator: arith             # a registered `generators` plugin, e.g. autorl_tui/tasks/arith/generator.py
      params: {...}
      splits: {train: {n: 4000, seed: 42}, dev: {n: 200, seed: 5678}, test: {n: 300, seed: 1234}}

    data:
      provider: files              # JSONL files shipped beside the card (paths relative to it)
      normalize: rows:normalize    # optional (also for `local`): an item normalizer for each row
      splits: {train: {path: data/train.jsonl}, ...}

    data:
      provider: local              # a user's local copy (e.g. the real GSM8K)
      env: GSM8K_PATH              # where to look first
      default: ~/data/gsm8k        # then here
      splits: {train: {file: train.jsonl}, test: {file: test.jsonl}, dev: {from: train, last: 500}}

    data:
      provider: python             # anything else: a registered data provider (or module:function)
      function: alfworld           # called as f(card, split, out_dir) -> Path

Data providers and generators are plugins (`autorl_tui/registry.py`, kinds `data_providers` and
`generators`), or `module:attribute` references to the task folder's own code
(`provider:materialize` is `provider.py` beside the card; `registry.resolve(kind, ref, card.dir)`; a name
is one a task folder `provides:` or an installed plugin).
Folders of task cards come from `--tasks-dir`, $AUTORL_TASKS_DIR, the home's `tasks/` and the
`tasks` plugins (the built-in `tasks/` folder is one).

Splits are materialized once into the home's cache (harness-private) as `<split>.jsonl` (or a
folder) and read from there; only `train` is ever copied into a workspace.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import sys
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autorl_tui import registry
from autorl_tui.catalog.official_data import official_files
from autorl_tui.catalog.official_data import origin as official_origin
from autorl_tui.catalog.protocol import DEFAULT_NAME, EvalProtocol, card_protocols, choose_protocol
from autorl_tui.exitcodes import UsageError
from autorl_tui import settings

SPLITS_AGENT_VISIBLE = ("train",)
HELD_OUT_SPLITS = ("test", "private")


def task_search_path(extra: list[Path] | None = None, home_root: Path | None = None) -> list[Path]:
    paths: list[Path] = []
    for p in extra or []:
        paths.append(Path(p))
    paths.extend(settings.current().tasks_dirs)
    if home_root is not None:
        paths.append(home_root / "tasks")
    for name in registry.names("tasks"):     # the built-in folder, then installed task packages
        paths.append(Path(registry.load("tasks", name)()))
    return paths


@dataclass
class TaskCard:
    id: str
    name: str
    level: int
    scorer: str
    primary_metric: str
    protocol: EvalProtocol
    data: dict[str, Any]
    dir: Path
    description_file: str = "description.md"
    default_budget: str = "10m"
    submission_cap: dict[str, Any] = field(default_factory=dict)   # {max_count: N, min_interval_s: S, size_factor: F}
    scorer_options: dict[str, Any] = field(default_factory=dict)
    workspace_files: list[str] = field(default_factory=list)        # extra agent-visible files beside the card
    version: str = "1"
    raw: dict[str, Any] = field(default_factory=dict)
    protocol_name: str = DEFAULT_NAME       # which of the card's named protocols this card is under
    protocol_about: str = ""
    data_home: Path | None = None           # the home's `data/` folder (`autorl-tui data get` puts files there)

    @property
    def protocol_names(self) -> list[str]:
        return list(card_protocols(self.raw)[0]) if self.raw else [self.protocol_name]

    @property
    def description(self) -> str:
        return (self.dir / self.description_file).read_text()

    @property
    def splits(self) -> list[str]:
        return list(self.data.get("splits", {}))

    def protocol_hash(self, cache_root: Path | None = None) -> str:
        """Keys the data cache and the cached baselines: the card's protocol and data spec, plus where
        data from outside the card comes from (another GSM8K_PATH is another dataset) and, for a
        provider that draws its partition from the home's secret (`SECRET_PARTITION = True` in its
        module), a commitment to the secret of the home whose cache root is given."""
        payload = {"protocol": self.protocol.to_dict(), "scorer": self.scorer, "data": self.data,
                   "scorer_options": self.scorer_options, "version": self.version}
        if self.protocol_name != DEFAULT_NAME:   # single-protocol cards keep their hashes
            payload["protocol_name"] = self.protocol_name
        source = data_source_fingerprint(self)
        if source:          # only cards reading outside data get the key: the others keep their hashes
            payload["source"] = source
        if cache_root is not None and uses_partition_secret(self):
            from autorl_tui.catalog.partition_secret import commitment, home_secret

            payload["partition_secret"] = commitment(home_secret(cache_root))
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "level": self.level, "scorer": self.scorer,
                "primary_metric": self.primary_metric, "protocol": self.protocol.to_dict(),
                "protocol_name": self.protocol_name, "protocol_about": self.protocol_about,
                "data_origin": data_origin(self),
                "data": self.data, "dir": str(self.dir), "default_budget": self.default_budget,
                "submission_cap": self.submission_cap, "scorer_options": self.scorer_options,
                "workspace_files": self.workspace_files, "version": self.version}


REQUIRED = ("id", "level", "scorer", "primary_metric", "data")


def load_task_card(path: Path, protocol: str | None = None, data_home: Path | None = None) -> TaskCard:
    """The card at `path` under its protocol `protocol` (the card's default when None): the
    protocol's `data` keys replace the card's, its `scorer_options` are merged over the card's."""
    card_path = path / "task.yaml" if path.is_dir() else path
    where = str(card_path)
    try:
        raw = yaml.safe_load(card_path.read_text())
    except FileNotFoundError:
        raise UsageError(f"task card {where} does not exist") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"task card {where} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise UsageError(f"task card {where} must be a mapping of fields, got {type(raw).__name__}")
    missing = [k for k in REQUIRED if k not in raw]
    if "protocol" not in raw and "protocols" not in raw:
        missing.append("protocol (or protocols)")
    if missing:
        raise UsageError(f"task card {where} lacks required field(s): {', '.join(missing)}")
    try:
        choice = choose_protocol(raw, protocol)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"task card {where}: protocol: {exc}") from None
    if raw["level"] not in (1, 2, 3):
        raise UsageError(f"task card {where}: level must be 1, 2 or 3, got {raw['level']!r}")
    if not isinstance(raw["data"], dict):
        raise UsageError(f"task card {where}: data must be a mapping")
    try:
        official_files({**raw["data"], **choice.data}, f"task card {where}")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    factor = (raw.get("submission_cap") or {}).get("size_factor")
    if factor is not None and (isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor <= 0):
        raise UsageError(f"task card {where}: submission_cap.size_factor must be a positive number (a submission may "
                         f"be that many times the base model's size), got {factor!r}")
    return TaskCard(
        id=str(raw["id"]), name=str(raw.get("name", raw["id"])), level=int(raw["level"]),
        scorer=str(raw["scorer"]), primary_metric=str(raw["primary_metric"]), protocol=choice.protocol,
        data={**dict(raw["data"]), **choice.data}, dir=card_path.parent.resolve(),
        description_file=choice.description or raw.get("description", "description.md"),
        default_budget=str(raw.get("budget", "10m")), submission_cap=dict(raw.get("submission_cap") or {}),
        scorer_options={**dict(raw.get("scorer_options") or {}), **choice.scorer_options},
        workspace_files=list(raw.get("workspace_files") or []), version=str(raw.get("version", "1")), raw=raw,
        protocol_name=choice.name, protocol_about=choice.about,
        data_home=Path(data_home) if data_home is not None else None)


def list_tasks(search_path: list[Path], data_home: Path | None = None) -> dict[str, TaskCard]:
    found: dict[str, TaskCard] = {}
    for root in search_path:
        if not root.is_dir():
            continue
        for card in sorted(root.glob("*/task.yaml")):
            try:
                task = load_task_card(card, data_home=data_home)
            except UsageError:
                continue
            found.setdefault(task.id, task)
    return found


def find_task(task_id: str, search_path: list[Path], protocol: str | None = None,
              data_home: Path | None = None) -> TaskCard:
    for root in search_path:
        card = root / task_id / "task.yaml"
        if card.exists():
            return load_task_card(card, protocol, data_home)
    from autorl_tui.catalog.autorl_bench import task_alias

    ours = task_alias(task_id)     # AutoRL-Bench's task ids (all six are our ids too)
    if ours is not None and ours != task_id:
        return find_task(ours, search_path, protocol, data_home)
    known = ", ".join(sorted(list_tasks(search_path))) or "none"
    raise UsageError(f"unknown task {task_id!r}; known tasks: {known} (searched {', '.join(map(str, search_path))})")


# --------------------------------------------------------------------------- data providers

class DataUnavailable(UsageError):
    """The task's data is not on this machine; the message says where to put it."""


def split_cache_dir(card: TaskCard, cache_root: Path) -> Path:
    return cache_root / card.id / card.protocol_hash(cache_root)


def materialize(card: TaskCard, split: str, cache_root: Path) -> Path:
    """Make the split's data available in the harness cache and return its path (file or folder).

    Safe across processes: concurrent first runs of a task take an exclusive lock per (task,
    protocol hash, split); the first one builds the split, the others wait and reuse its result.
    Files are written to unique temporary names and renamed into place, so a crash never leaves a
    half-written split behind a done marker."""
    if split not in card.data.get("splits", {}):
        raise UsageError(f"task {card.id} has no split {split!r}; it has {', '.join(card.splits)}")
    out_dir = split_cache_dir(card, cache_root)
    out_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(out_dir, 0o700)
    done_marker = out_dir / f".{split}.done"
    if done_marker.exists():
        return Path(done_marker.read_text())
    with open(out_dir / f".{split}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done_marker.exists():       # built by another process while this one waited
            return Path(done_marker.read_text())
        path = _build_split(card, split, out_dir)
        _atomic_write_text(done_marker, str(path))
    return path


def _build_split(card: TaskCard, split: str, out_dir: Path) -> Path:
    provider = card.data.get("provider", "files")
    if provider == "generator":
        return _materialize_generator(card, split, out_dir)
    if provider == "files":
        return _materialize_files(card, split, out_dir)
    if provider == "local":
        return _materialize_local(card, split, out_dir)
    if provider == "python":
        why = provider_data_missing(card)
        if why:
            raise DataUnavailable(why)
        return Path(provider_function(card)(card, split, out_dir))
    raise UsageError(f"task {card.id}: unknown data provider {provider!r} (generator, files, local, python)")


def _unique_tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = _unique_tmp(path)
    tmp.write_text(text)
    os.replace(tmp, path)


def _write_jsonl(path: Path, items: list[dict]) -> Path:
    tmp = _unique_tmp(path)
    try:
        with open(tmp, "w") as fh:
            for item in items:
                fh.write(json.dumps(item) + "\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _materialize_generator(card: TaskCard, split: str, out_dir: Path) -> Path:
    generate = registry.resolve("generators", str(card.data["generator"]), card.dir)
    spec = dict(card.data["splits"][split])
    items = generate(split=split, params=dict(card.data.get("params") or {}), **spec)
    return _write_jsonl(out_dir / f"{split}.jsonl", items)


def _materialize_files(card: TaskCard, split: str, out_dir: Path) -> Path:
    src = card.dir / card.data["splits"][split]["path"]
    if not src.exists():
        raise DataUnavailable(f"task {card.id}: split {split} file {src} is missing")
    return _write_jsonl(out_dir / f"{split}.jsonl", _normalized(card, read_items(src), split))


def files_fingerprint(root: Path, names) -> str:
    """A folder's named files as a cache-key part: the folder, each file's size and modification time."""
    stats = []
    for name in names:
        try:
            st = (root / name).stat()
            stats.append((name, st.st_size, st.st_mtime_ns))
        except OSError:
            stats.append((name, None, None))
    return json.dumps([str(root.resolve()), stats])


def data_source_fingerprint(card: TaskCard) -> str:
    """Where a `local` or `python` provider would read its data from, and the files' sizes and
    modification times: empty for data shipped with the card or generated from it."""
    provider = card.data.get("provider", "files")
    if provider == "local":
        root = local_data_root(card)
        if root is None:
            return "missing"
        files = sorted({s.get("file") for s in card.data.get("splits", {}).values() if s.get("file")})
        return files_fingerprint(root, files)
    if provider == "python":
        fingerprint = getattr(provider_module(card), "source_fingerprint", None)
        return fingerprint(card) if fingerprint else ""
    return ""


def uses_partition_secret(card: TaskCard) -> bool:
    """The card's provider draws its partition from the home's secret (catalog/partition_secret.py)."""
    if card.data.get("provider", "files") != "python":
        return False
    try:
        return bool(getattr(provider_module(card), "SECRET_PARTITION", False))
    except Exception:  # noqa: BLE001 - a provider that cannot load fails where it is used, not here
        return False


def provider_function(card: TaskCard):
    """The `python` provider's function: a registered data provider, or a `module:function` (a
    module of the task's folder, e.g. `provider:materialize` for `provider.py` beside the card, or
    an importable one)."""
    return registry.resolve("data_providers", str(card.data.get("function", "")), card.dir)


def provider_module(card: TaskCard):
    """The provider function's module, where its optional hooks live (`available(card)`,
    `source_fingerprint(card)`)."""
    return sys.modules[provider_function(card).__module__]


def provider_data_missing(card: TaskCard) -> str | None:
    """A `python` provider's own answer (its optional `available(card)`): None when its data can be had
    here, else what is missing and how to get it (a benchmark card without its official data)."""
    check = getattr(provider_module(card), "available", None)
    return check(card) if check is not None else None


def local_data_root(card: TaskCard) -> Path | None:
    """Where a `local` card's data is: the folder its variable names, else the copy `autorl-tui
    data get` made in the home, else the card's default folder."""
    candidates = []
    env = card.data.get("env")
    if env and os.environ.get(env):
        candidates.append(Path(os.environ[env]).expanduser())
    if card.data_home is not None:
        candidates.append(card.data_home / card.id)
    if card.data.get("default"):
        candidates.append(Path(card.data["default"]).expanduser())
    for c in candidates:
        if c.is_dir():
            return c
    return None


def _materialize_local(card: TaskCard, split: str, out_dir: Path) -> Path:
    root = local_data_root(card)
    spec = card.data["splits"][split]
    if root is None:
        files = sorted({s.get("file") for s in card.data["splits"].values() if s.get("file")})
        env = card.data.get("env")
        get = (f"run `autorl-tui data get {card.id}` (fetches the official files into the home and verifies "
               f"them), or put " if card.data.get("official") else "Put ")
        raise DataUnavailable(
            f"task {card.id} needs its data on this machine and none was found. {get}"
            f"{' and '.join(files)} in {card.data.get('default', '<a folder>')}"
            + (f" or set {env}=/path/to/folder" if env else "")
            + (f". {card.data['hint']}" if card.data.get("hint") else ""))
    if "from" in spec:   # carve a split out of another file (e.g. dev = last 500 of train)
        base = read_items(root / card.data["splits"][spec["from"]]["file"])
        items = base[-int(spec["last"]):] if "last" in spec else base[: int(spec["first"])]
    else:
        path = root / spec["file"]
        if not path.exists():
            raise DataUnavailable(f"task {card.id}: expected {path} (split {split}); see the task's description")
        items = read_items(path)
        for other in card.data["splits"].values():   # a split other splits are carved from loses them
            if other.get("from") == split and other.get("overlaps") != split:   # overlaps: keeps them
                n = int(other.get("last", 0))
                items = items[:-n] if n else items[int(other.get("first", 0)):]
    return _write_jsonl(out_dir / f"{split}.jsonl", _normalized(card, items, split))


def _normalized(card: TaskCard, items: list[dict], split: str) -> list[dict]:
    """The split's rows through the card's `data.normalize` (an item normalizer), if it names one
    (`files` and `local` providers: e.g. rows in a benchmark's official shape)."""
    normalize = card.data.get("normalize")
    if not normalize:
        return items
    fn = registry.resolve("item_normalizers", normalize, card.dir)
    return [fn(x, i, split) for i, x in enumerate(items)]


def data_origin(card: TaskCard) -> dict:
    """Where the card's data comes from (official files and their checksums, a user's copy, or a
    stand-in), for the run spec and reports."""
    provider = card.data.get("provider", "files")
    root = local_data_root(card) if provider == "local" else None
    if provider == "python" and card.data.get("official"):
        env = card.data.get("env")     # a copy the user names wins, as for `local` cards
        root = (Path(os.environ[env]).expanduser() if env and os.environ.get(env)
                else card.data_home / card.id if card.data_home is not None else None)
        root = root if root is not None and root.is_dir() else None
    return official_origin(card.data, root, card.data.get("env"))


def read_items(path: Path) -> list[dict]:
    path = Path(path)
    if path.suffix == ".json":
        data = json.loads(path.read_text())
        return data if isinstance(data, list) else data.get("items", [])
    items = []
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            line = line.strip()
            if line:
                try:
                    items.append(json.loads(line))
                except ValueError as exc:
                    raise UsageError(f"{path}:{n}: not a JSON line ({exc})") from None
    return items
