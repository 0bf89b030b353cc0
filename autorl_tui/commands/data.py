"""`autorl-tui data get TASK`: fetch a task card's official data files (`data.official`,
catalog/official_data.py) from the hubs they are published on, verify their checksums and place
them in `<home>/data/<task>/`, where the task reads them (its `GSM8K_PATH`-style variable, when
set, still wins).

Nothing is placed unless every file arrived and matched its sha256: files are downloaded into a
temporary folder beside the destination, verified, then renamed into place one by one, and the
manifest (which marks the folder as verified official data) is written last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from autorl_tui.exitcodes import InfraError, UsageError

CHUNK = 1 << 20
TIMEOUT_S = 60


def register(subparsers) -> None:
    p = subparsers.add_parser("data", help="fetch a task's official data files",
                              description="Fetch, verify and place a task's official data (`data get TASK`).")
    sub = p.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    get = sub.add_parser("get", help="fetch a task's official files into <home>/data/<task>/ and verify them",
                         description="Download the files the task card declares under data.official (HF_ENDPOINT "
                                     "and AUTORL_GITHUB_ENDPOINT choose the hubs' addresses), check their sha256, "
                                     "and place them in <home>/data/<task>/.")
    get.add_argument("task", help="a task id (e.g. gsm8k)")
    get.add_argument("--json", action="store_true", help="print the result as JSON")
    get.add_argument("--tasks-dir", action="append", default=argparse.SUPPRESS, help="extra folder of task cards")
    p.set_defaults(func=run)


def run(args) -> int:
    if getattr(args, "data_command", None) != "get":
        raise UsageError("usage: autorl-tui data get TASK [--home DIR]")
    from autorl_tui.catalog.official_data import MANIFEST, official_files
    from autorl_tui.catalog.tasks import find_task, task_search_path
    from autorl_tui.home import Home

    home = Home.open(args.home)
    card = find_task(args.task, task_search_path([Path(d) for d in (args.tasks_dir or [])], home_root=home.root))
    files = official_files(card.data, f"task {card.id}")
    if not files:
        raise UsageError(f"task {card.id} declares no official data files (data.official); its data comes "
                         f"{'from its generator' if card.data.get('provider') == 'generator' else 'with the task'}")
    dest = home.data / card.id
    home.data.mkdir(exist_ok=True)
    os.chmod(home.data, 0o700)
    stage = Path(tempfile.mkdtemp(prefix=f".get-{card.id}-", dir=home.data))
    try:
        got = [(f, _download(f, stage / f"{i}.part")) for i, f in enumerate(files)]
        dest.mkdir(exist_ok=True)
        (dest / MANIFEST).unlink(missing_ok=True)     # the folder is not verified while files change
        for f, (path, _size, _digest) in got:
            target = dest / f.path
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
        manifest = {"task": card.id, "files": [{"path": f.path, "source": f.source(), "url": f.url(),
                                                 "sha256": digest, "size": size,
                                                 **({} if f.pinned else {"pinned": False})}
                                                for f, (_, size, digest) in got]}
        tmp = stage / "manifest"
        tmp.write_text(json.dumps(manifest, indent=1) + "\n")
        os.replace(tmp, dest / MANIFEST)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    if args.json:
        json.dump({"task": card.id, "folder": str(dest), **manifest}, sys.stdout, indent=1)
        print()
        return 0
    for entry in manifest["files"]:
        unpinned = "" if entry.get("pinned", True) else "; not pinned by the card: recorded as downloaded"
        print(f"{dest / entry['path']}  sha256 {entry['sha256']}  ({entry['size']:,} bytes, {entry['source']}"
              f"{unpinned})")
    print(f"task {card.id}: official data verified in {dest}")
    return 0


def _download(f, out: Path) -> tuple[Path, int, str]:
    """Download one file to `out`, hashing as it streams: (path, size, sha256); InfraError on failure
    or a checksum that is not the card's (a card's `unpinned` file is taken as it comes)."""
    import hashlib
    import urllib.error
    import urllib.request

    url = f.url()
    h = hashlib.sha256()
    size = 0
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers={"User-Agent": "autorl-tui"}),
                                    timeout=TIMEOUT_S) as resp, open(out, "wb") as fh:
            for block in iter(lambda: resp.read(CHUNK), b""):
                h.update(block)
                fh.write(block)
                size += len(block)
    except urllib.error.HTTPError as exc:
        raise InfraError(f"cannot fetch {f.path}: {url} answered HTTP {exc.code}; check the card's repo/revision/"
                         f"file, or HF_ENDPOINT / AUTORL_GITHUB_ENDPOINT if you use a mirror") from None
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise InfraError(f"cannot fetch {f.path} from {url}: {reason}; check the network (or HF_ENDPOINT / "
                         f"AUTORL_GITHUB_ENDPOINT for a mirror) and run it again") from None
    if f.pinned and h.hexdigest() != f.sha256.lower():
        raise InfraError(f"{f.path} from {url} does not match the card's checksum (sha256 {h.hexdigest()}, "
                         f"expected {f.sha256}): nothing was placed; the hub or mirror serves another file")
    return out, size, h.hexdigest()
