"""The real agent CLIs from npm, installed once into a cache folder ($AUTORL_AGENT_CLI_CACHE,
default ~/.cache/autorl-tui/agent-clis) for tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

PACKAGES = ["@anthropic-ai/claude-code", "@openai/codex", "@google/gemini-cli", "opencode-ai"]
BINARIES = ["claude", "codex", "gemini", "opencode"]


def install_agent_clis() -> Path:
    """Returns the folder holding the executables; skips (loudly) only when npm is missing."""
    cache = Path(os.environ.get("AUTORL_AGENT_CLI_CACHE") or Path.home() / ".cache" / "autorl-tui" / "agent-clis")
    bin_dir = cache / "node_modules" / ".bin"
    if not all((bin_dir / b).exists() for b in BINARIES):
        if shutil.which("npm") is None:
            pytest.skip("!!! SKIPPED: npm is not installed, so the real Claude Code, Codex, Gemini and opencode CLIs "
                        "cannot be installed; install Node.js/npm (apt-get install -y nodejs npm) to run these tests !!!")
        cache.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(["npm", "install", "--prefix", str(cache), "--no-audit", "--no-fund", *PACKAGES],
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"npm install failed:\n{proc.stderr[-3000:]}"
    return bin_dir
