"""Official data files declared by a task card (`data.official`), where they come from and how a
copy is recognised as theirs.

    data:
      official:
        - {path: test.jsonl, hub: github, repo: openai/grade-school-math, revision: <commit>,
           file: grade_school_math/data/test.jsonl, sha256: <hex>}
        - {path: eval.json, hub: huggingface, repo: tatsu-lab/alpaca_eval, revision: <rev>,
           file: alpaca_eval.json, sha256: <hex>, repo_type: dataset}

`autorl-tui data get TASK` (commands/data.py) fetches them into `<home>/data/<task>/` and writes
MANIFEST there, the checksums it verified; a card's data origin (reports) reads that manifest.
URLs are built from the hub clients' endpoint variables, so a local server with the same layout
stands in for the hubs: HF_ENDPOINT (default https://huggingface.co) and AUTORL_GITHUB_ENDPOINT
(default https://raw.githubusercontent.com).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from autorl_tui import settings

MANIFEST = ".official.json"
HUBS = ("huggingface", "github")
# A card may declare a file whose checksum its author could not obtain (`sha256: unpinned`): `data get`
# then records the checksum of what it downloaded, and reports say so ("unpinned"), so that a copy
# is still recognised as the one fetched; pin it by writing the printed sha256 into the card.
UNPINNED = "unpinned"
FIELDS = {"path", "hub", "repo", "revision", "file", "sha256", "repo_type"}


@dataclass(frozen=True)
class OfficialFile:
    path: str          # where it goes, relative to the task's data folder
    hub: str
    repo: str
    revision: str
    file: str
    sha256: str
    repo_type: str = "dataset"

    def url(self) -> str:
        if self.hub == "huggingface":
            endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
            prefix = {"dataset": "datasets/", "space": "spaces/"}.get(self.repo_type, "")
            return f"{endpoint.rstrip('/')}/{prefix}{self.repo}/resolve/{self.revision}/{self.file}"
        endpoint = settings.current().github_endpoint
        return f"{endpoint.rstrip('/')}/{self.repo}/{self.revision}/{self.file}"

    @property
    def pinned(self) -> bool:
        return self.sha256 != UNPINNED

    def source(self) -> str:
        """Where it is published, independent of the endpoint (for reports)."""
        return f"{self.hub}:{self.repo}@{self.revision}/{self.file}"


def official_files(data: dict, where: str = "task card") -> list[OfficialFile]:
    """The card's declarations, checked. ValueError says what is wrong with one."""
    raw = data.get("official") or []
    if not isinstance(raw, list):
        raise ValueError(f"{where}: data.official must be a list of files")
    out = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: data.official[{i}] must be a mapping")
        missing = sorted({"path", "hub", "repo", "revision", "file", "sha256"} - set(entry))
        unknown = sorted(set(entry) - FIELDS)
        if missing or unknown:
            raise ValueError(f"{where}: data.official[{i}] " + (f"lacks {', '.join(missing)}" if missing else
                                                                 f"has unknown key(s) {', '.join(unknown)}"))
        f = OfficialFile(**{k: str(v) for k, v in entry.items()})
        if f.hub not in HUBS:
            raise ValueError(f"{where}: data.official[{i}].hub must be one of {', '.join(HUBS)}, got {f.hub!r}")
        rel = PurePosixPath(f.path)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise ValueError(f"{where}: data.official[{i}].path must be a relative path inside the task's data "
                             f"folder, got {f.path!r}")
        if f.pinned and (len(f.sha256) != 64 or any(c not in "0123456789abcdef" for c in f.sha256.lower())):
            raise ValueError(f"{where}: data.official[{i}].sha256 must be 64 hex digits (or `{UNPINNED}`)")
        out.append(f)
    return out


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def manifest_matches(folder: Path, files: list[OfficialFile]) -> bool:
    """`folder` holds the files `data get` verified against these declarations (by its manifest
    and the files' sizes, without re-hashing them)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    recorded = {m.get("path"): m for m in manifest.get("files", []) if isinstance(m, dict)}
    for f in files:
        m = recorded.get(f.path)
        if not m or (f.pinned and m.get("sha256") != f.sha256) or (not f.pinned and m.get("pinned", True)):
            return False
        try:
            if (folder / f.path).stat().st_size != m.get("size"):
                return False
        except OSError:
            return False
    return True


def origin(data: dict, root: Path | None, env: str | None) -> dict:
    """Where a card's data comes from, for run reports: official files (with their checksums),
    a user's own copy, or the card's stand-in (files shipped with it, or generated)."""
    provider = data.get("provider", "files")
    try:
        files = official_files(data)
    except ValueError:
        files = []
    if files and root is not None and manifest_matches(root, files):
        recorded = {m["path"]: m for m in json.loads((root / MANIFEST).read_text())["files"]}
        return {"kind": "official", "folder": str(root),
                "files": [{"path": f.path, "source": f.source(), "sha256": recorded[f.path]["sha256"],
                           **({} if f.pinned else {"pinned": False})} for f in files]}
    if provider == "local" or files:
        return {"kind": "local copy" if root is not None else "missing", "folder": str(root) if root else None,
                "verified": False, "env": env}
    if provider == "python":      # the task's own provider says where it reads from (its description)
        return {"kind": "provider", "function": str(data.get("function", ""))}
    return {"kind": "generated" if provider == "generator" else "bundled", "stand_in": True}
