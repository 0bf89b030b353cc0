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
def shared_models_dir(tmp_path_factory) -> Path:
    """Models built once per test session (the tiny model takes seconds to build)."""
    return tmp_path_factory.mktemp("models")
