import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Tests never touch the user's real home or caches, and never reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Ray clusters the tests start enforce token authentication, as the engine requires
# (executors/ray_auth.py): one token for the session, set before anything imports ray (it reads
# its authentication mode once, at import), inherited by every engine and node the tests start.
os.environ.setdefault("RAY_AUTH_MODE", "token")
os.environ.setdefault("RAY_AUTH_TOKEN", __import__("secrets").token_hex(16))
# A command run without --home (in-process or as a subprocess) resolves $AUTORL_HOME, then
# $XDG_DATA_HOME: both point into a temporary folder for the whole session, never at ~/.local/share.
_SESSION_DATA = tempfile.mkdtemp(prefix="autorl-tests-data-")
_REAL_HOME = Path.home() / ".local" / "share" / "autorl-tui"     # the default home a user has
_REAL_HOME_BEFORE = _REAL_HOME.exists()
atexit.register(shutil.rmtree, _SESSION_DATA, True)
os.environ["XDG_DATA_HOME"] = _SESSION_DATA
os.environ["AUTORL_HOME"] = os.path.join(_SESSION_DATA, "autorl-tui")
# What the test processes of one session share (tests/support/shared.py): made by the first process
# (the controller when pytest-xdist runs workers, which inherit the variable), removed when it exits.
# 0711 so that a sandboxed agent's uid can reach a home inside it.
if "AUTORL_TEST_SHARED" not in os.environ:
    _SHARED = tempfile.mkdtemp(prefix="autorl-tests-shared-", dir="/tmp")
    os.chmod(_SHARED, 0o711)
    atexit.register(shutil.rmtree, _SHARED, True)
    os.environ["AUTORL_TEST_SHARED"] = _SHARED


@pytest.fixture
def home_dir(tmp_path) -> Path:
    """A fresh, empty autorl-tui home."""
    d = tmp_path / "home"
    d.mkdir()
    return d


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The built-in `tiny` model (seed 0), built once and cached between test sessions under
    .pytest_cache, keyed by the sources that determine its weights."""
    from autorl_tui.tasks.arith import tiny_model as tiny

    root = Path(os.environ.get("AUTORL_TEST_CACHE", REPO / ".pytest_cache" / "autorl-models"))
    return tiny.build_tiny_model(root / f"tiny-{tiny.source_key()}", seed=0)


@pytest.fixture(scope="session")
def train_twice_home(tiny_model_dir) -> Path:
    """A home where the real engine ran plan `reports-e2e` (`--batch`): the control `baseline-copy`
    and the scripted `test-train-twice` on arith-small with the tiny model. Built once per test
    session, whichever worker asks first; tests only read it."""
    from tests.support.harness import TASKS, TEST_AGENTS, cli, install_model, write_plan
    from tests.support.shared import build_once

    def build(root: Path) -> None:
        home = root / "home"
        install_model(tiny_model_dir, home)
        plan = write_plan(root / "plan.yaml", name="reports-e2e", agents=["baseline-copy", "test-train-twice"],
                          budget="240s")
        proc = cli("--agents-dir", str(TEST_AGENTS), "--tasks-dir", str(TASKS), "--plain", "--batch", str(plan),
                   home=home, timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    return build_once("train-twice", build) / "home"


@pytest.fixture(scope="session")
def docker_available() -> bool:
    try:
        import docker

        docker.from_env(timeout=5).ping()
        return True
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    """Files with slow (or Docker) tests first, each file's tests kept together and in order. The
    parallel workers of `make test` (pytest-xdist, `--dist loadfile --no-loadscope-reorder`) take
    whole files in this order, so the long ones start early and the many quick ones fill in last."""
    heavy = {item.path for item in items if item.get_closest_marker("slow") or item.get_closest_marker("docker")}
    items.sort(key=lambda item: item.path not in heavy)    # stable: the order within each group is kept


def pytest_sessionfinish(session, exitstatus):
    """Tests use temporary homes only: a default home that appeared during the session is a test
    writing into the user's real one, and fails the run."""
    if not _REAL_HOME_BEFORE and _REAL_HOME.exists():
        session.exitstatus = 1
        print(f"\nFAILED: a test wrote into the user's real home {_REAL_HOME}; tests must use temporary homes")
