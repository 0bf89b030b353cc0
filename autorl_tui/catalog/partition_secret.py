"""A home's partition secret (issue 31): what divides a task's items between train, dev and test
is drawn from a secret the agent never sees, so the held-out targets cannot be recomputed from
the workspace's data and the documented rule.

The secret is 32 random bytes in `<home>/cache/tasks/.partition-secret` (the cache root the splits
are built under: harness-private, mode 0700, never inside a workspace), created once with mode 0600.
Every run of a home draws the same partition (its cached splits and baselines stay valid); another
home draws another. The protocol hash records a commitment (a hash of the secret), never the
secret. A test home fixes its partition by writing the file before the first split is built."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

SECRET_NAME = ".partition-secret"
SECRET_BYTES = 32


def secret_path(cache_root: Path) -> Path:
    return Path(cache_root) / SECRET_NAME


def home_secret(cache_root: Path) -> bytes:
    """The home's secret, created on first use (O_EXCL: concurrent first runs agree on one)."""
    path = secret_path(cache_root)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        pass
    else:
        tmp_secret = secrets.token_bytes(SECRET_BYTES)
        with os.fdopen(fd, "wb") as fh:
            fh.write(tmp_secret.hex().encode())
            fh.flush()
            os.fsync(fh.fileno())
        return tmp_secret
    for _ in range(1000):           # a concurrent creator may not have written it yet
        text = path.read_bytes().strip()
        if len(text) == 2 * SECRET_BYTES:
            return bytes.fromhex(text.decode())
        os.sched_yield()
    raise RuntimeError(f"{path} does not hold a {SECRET_BYTES}-byte hex secret: delete it to draw a new one "
                       f"(cached splits and baselines of this home are then rebuilt)")


def keyed_seed(secret: bytes, task_id: str, seed: int) -> int:
    """The seed a partition is actually shuffled with: the card's seed keyed with the home's secret."""
    digest = hmac.new(secret, f"partition\0{task_id}\0{seed}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big")


def commitment(secret: bytes) -> str:
    """What the protocol hash records: a hash of the secret, from which the secret cannot be had."""
    return hashlib.sha256(b"autorl-tui partition secret\0" + secret).hexdigest()[:16]


def cache_root_of(split_dir: Path) -> Path:
    """The cache root above a split folder (`<cache root>/<task>/<protocol hash>`, catalog.tasks.split_cache_dir)."""
    return Path(split_dir).parent.parent
