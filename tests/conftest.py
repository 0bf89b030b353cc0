import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Tests never touch the user's real home or caches, and never reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


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
    from autorl_tui.catalog import tiny

    root = Path(os.environ.get("AUTORL_TEST_CACHE", REPO / ".pytest_cache" / "autorl-models"))
    return tiny.build_tiny_model(root / f"tiny-{tiny.source_key()}", seed=0)


@pytest.fixture(scope="session")
def docker_available() -> bool:
    try:
        import docker

        docker.from_env(timeout=5).ping()
        return True
    except Exception:
        return False
