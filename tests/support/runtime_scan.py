"""The host side of the runtime scan (tests/functional/test_agent_runtime_scan.py).

The agent (tests/agents/runtime_scan.py) is given no held-out item: it sends back the paths and
sizes of every file it can open in its root. This side, as root outside the sandbox, reads the
same paths through the agent's own view (`/proc/<agent pid>/root/<path>`: its mount namespace,
whatever bwrap or Docker put there) and looks in them for the held-out items of every installed
task: their ids (as quoted strings, the way data files hold them) and distinctive lines of their
prompts (raw and JSON-escaped). gzip files and zip members (wheels, .pt, .npz, ...) are read
decompressed. The search is `grep -F` (Aho–Corasick/Commentz–Walter in GNU grep) over every
file, one grep per CPU each over its share of the files, so the whole root is read once. (ripgrep
was measured as the searcher on 2.9 GiB of this root's files with the ~2,000 needles: 26.9 s of CPU
against grep's 26.1 s; less than half grep's CPU on one large binary, more on many small files.)

Needles the agent may legitimately hold are dropped: a prompt line several items share (the task's
template), and anything in what the agent is given (its run's train split, its documents)."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

MIN_LINE = 40                 # a prompt line shorter than this is not distinctive enough to search for
MIN_ID = 10                   # shorter ids (aj-005, su-7) name nothing; their prompts are searched
# an id that is a split's name and a counter (test-0003, dsqa-test-0000) says nothing of the item
COUNTER_ID = re.compile(r"^([A-Za-z]+-)*(train|dev|val|test)-?[0-9]+$")
MAX_FILE = 512 * 2 ** 20      # files read whole up to this size; larger ones must be ELF objects
MAX_MEMBER = 256 * 2 ** 20    # decompressed size read of one gzip file or zip member
TEXT_KEYS = ("prompt", "question", "instruction", "problem", "goal", "task", "input")
ID_KEYS = ("id", "task_id", "item_id", "game_id")


@dataclass
class Needles:
    ids: dict[str, str] = field(default_factory=dict)      # needle -> "task/split/id"
    texts: dict[str, str] = field(default_factory=dict)

    def all(self) -> dict[str, str]:
        return {**self.ids, **self.texts}


def _items(path: Path) -> list[dict]:
    """The items of a materialized split: a .jsonl/.json file, or a folder's items.jsonl (beside it
    lie the environment's files: a shop's catalog, a search corpus, games named by the items' ids)."""
    files = [path] if path.is_file() else [path / "items.jsonl"]
    out = []
    for f in files:
        text = f.read_text(errors="replace")
        if f.suffix == ".json":
            try:
                data = json.loads(text)
            except ValueError:
                continue
            data = data if isinstance(data, list) else data.get("items", [data]) if isinstance(data, dict) else []
            out += [d for d in data if isinstance(d, dict)]
            continue
        for line in text.splitlines():
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict):
                out.append(d)
    return out


def _variants(s: str) -> set[str]:
    return {s, json.dumps(s)[1:-1], json.dumps(s, ensure_ascii=False)[1:-1]}


def _lines(item: dict) -> set[str]:
    out = set()
    for key in TEXT_KEYS:
        value = item.get(key)
        if isinstance(value, str):
            out |= {line.strip() for line in value.splitlines() if len(line.strip()) >= MIN_LINE}
    return out


def held_out_needles(splits: dict[str, dict[str, Path]], legit_text: str) -> Needles:
    """`splits`: {task id: {"dev": path, "test": path[, "train": path]}} as materialized by the
    harness. A prompt line is a needle when it belongs to one item alone (a line that several items
    share is the task's template, printed by its own code and documents) and is not in
    `legit_text`, what the agent is given anyway (its train split and documents)."""
    n = Needles()
    for task, paths in splits.items():
        items = {split: _items(paths[split]) for split in ("train", "dev", "test") if split in paths}
        seen: dict[str, int] = {}
        for split_items in items.values():
            for item in split_items:
                for line in _lines(item):
                    seen[line] = seen.get(line, 0) + 1
        for split in ("dev", "test"):
            for item in items.get(split, []):
                where = f"{task}/{split}"
                name = next((item[k] for k in ID_KEYS if isinstance(item.get(k), str)), "?")
                for key in ID_KEYS:
                    value = item.get(key)
                    if isinstance(value, str) and len(value) >= MIN_ID and not COUNTER_ID.match(value):
                        for q in ('"', "'"):
                            if f"{q}{value}{q}" not in legit_text:
                                n.ids[f"{q}{value}{q}"] = f"{where} id {value}"
                for line in _lines(item):
                    if seen[line] > 1:
                        continue
                    for v in _variants(line):
                        if v not in legit_text:
                            n.texts[v] = f"{where} prompt of {name}: {line[:60]}"
    return n


@dataclass
class ScanResult:
    files: int = 0
    bytes: int = 0
    members: int = 0
    hits: list[str] = field(default_factory=list)          # "path[!member]: what"
    unreadable: list[str] = field(default_factory=list)    # listed by the agent, gone when read
    too_big_not_elf: list[str] = field(default_factory=list)
    search_cpu_s: float = 0.0      # grep's CPU time (user + system)


def _decompressed(data: bytes, name: str) -> list[tuple[str, bytes]]:
    """(member name, content) of a gzip file or zip archive; [] for anything else."""
    if data[:2] == b"\x1f\x8b":
        try:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            return [("(gzip)", d.decompress(data, MAX_MEMBER))]
        except zlib.error:
            return []
    if data[:4] == b"PK\x03\x04":
        import io

        out = []
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                for info in z.infolist():
                    if info.is_dir():
                        continue
                    with z.open(info) as fh:
                        content = fh.read(MAX_MEMBER)
                    out.append((info.filename, content))
                    out += [(f"{info.filename}!{m}", c) for m, c in _decompressed(content, info.filename)]
        except (zipfile.BadZipFile, OSError, NotImplementedError, zlib.error, EOFError):
            return out
        return out
    return []


SEPARATOR = b"\n\0\n"   # between members in a pack: no needle holds a newline, so none spans one


def scan(pid: int, listing: list[tuple[str, int]], needles: Needles, work: Path,
         seen: dict | None = None) -> ScanResult:
    """Read every listed file through /proc/<pid>/root and grep them all for the needles at once.

    The members of each archive are written, decompressed, into one pack file (separated by
    SEPARATOR, their offsets kept) so that grep reads few files. `seen`, shared between scans of
    one session, holds the findings per file identity (device, inode, size, mtime): a file another
    executor's agent could read too (the same host file, bound into both) is not read twice. A
    scan adds its files to `seen` only once its search has finished: a scan that fails (a file it
    could not search) leaves nothing a later scan would take for searched."""
    seen = {} if seen is None else seen
    res = ScanResult()
    root = f"/proc/{pid}/root"
    work.mkdir(parents=True, exist_ok=True)
    patterns = work / "needles.txt"
    table = needles.all()
    patterns.write_text("".join(n + "\n" for n in table))
    names: dict[str, tuple[str, tuple, list]] = {}   # path grep is given -> (listed path, identity, pack offsets)
    fresh: dict[tuple, list[str]] = {}                # findings per identity of this scan's files
    again: list[tuple[str, tuple]] = []               # a path whose file this scan already reads (a hard link)
    for path, _size in listing:
        host = root + path
        try:
            with open(host, "rb") as fh:
                st = os.fstat(fh.fileno())
                identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
                res.files += 1
                res.bytes += st.st_size
                if identity in seen:
                    res.hits += [f"{path}{h}" for h in seen[identity]]
                    continue
                if identity in fresh:
                    again.append((path, identity))
                    continue
                magic = fh.read(4)
                if st.st_size > MAX_FILE:
                    if magic != b"\x7fELF":
                        res.too_big_not_elf.append(path)
                    continue
                packed = magic[:2] == b"\x1f\x8b" or magic == b"PK\x03\x04"
                data = magic + fh.read() if packed else b""
        except OSError:
            res.unreadable.append(path)
            continue
        fresh[identity] = []
        names[host] = (path, identity, [])
        members = _decompressed(data, path)
        if members:
            pack = work / f"pack-{len(names)}"
            offsets, at = [], 0
            with open(pack, "wb") as out:
                for member, content in members:
                    offsets.append((at, member))
                    out.write(content + SEPARATOR)
                    at += len(content) + len(SEPARATOR)
            res.members += len(members)
            names[str(pack)] = (path, identity, offsets)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    hits = _grep(patterns, list(names), work)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    res.search_cpu_s = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    for hit in hits:
        path, identity, offsets = names[hit]
        text = open(hit, "rb").read().decode("latin-1")
        found = []
        for needle, what in table.items():
            at = text.find(needle.encode().decode("latin-1"))
            if at >= 0:
                member = next((m for start, m in reversed(offsets) if start <= at), None)
                found.append(f"{'!' + member if member else ''}: {what}")
        found = found[:5] or [": (grep matched)"]
        fresh[identity] += found
        res.hits += [f"{path}{f}" for f in found]
    for path, identity in again:
        res.hits += [f"{path}{h}" for h in fresh[identity]]
    seen.update(fresh)
    return res


def _grep(patterns: Path, files: list[str], work: Path) -> list[str]:
    """The files holding any pattern (fixed strings, bytes as they are). grep is one process per
    CPU (up to 4), each over every n-th file with its own output: with ~2,000 needles grep reads
    about 150 MB/s per core, and the roots hold gigabytes. Anything grep says on stderr (a file it
    could not read) fails the scan: a file not searched is not a file without a hit."""
    if not files or not patterns.read_text():
        return []
    jobs = max(1, min(4, os.cpu_count() or 1, len(files)))
    greps = []
    for i in range(jobs):
        listing = work / f"files-{i}.txt"
        listing.write_bytes(b"\0".join(os.fsencode(f) for f in files[i::jobs]) + b"\0")
        greps.append(subprocess.Popen(["xargs", "-0", "-a", str(listing), "grep", "-F", "-a", "-l", "--null", "-f",
                                       str(patterns), "--"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"}))
    found = []
    for xargs in greps:
        out, err = xargs.communicate()
        # 123: some grep found nothing (exit 1); an error (exit 2) also ends as 123, so stderr decides
        if xargs.returncode not in (0, 1, 123) or err.strip():
            raise RuntimeError(f"grep failed ({xargs.returncode}): {err.decode(errors='replace')[-500:]}")
        found += [os.fsdecode(p) for p in out.split(b"\0") if p]
    return found
