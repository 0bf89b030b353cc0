"""Headless Chromium for report tests: a screenshot, the rendered DOM, and console errors."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or (
    "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
# Where screenshots are kept after the test run (for people to look at).
SCREENSHOT_DIR = Path(os.environ.get("AUTORL_SCREENSHOT_DIR", "/tmp/autorl-report-screenshots"))

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]
# Our pages log nothing: any console line (errors, warnings, uncaught exceptions) is a failure.
CONSOLE_ERROR = re.compile(r"(:CONSOLE[:(]\d+|Uncaught|net::ERR_|Refused to load)")


@dataclass
class Rendered:
    dom: str
    screenshot: Path
    console_errors: list[str]


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=timeout)


def render(html: Path, screenshot: Path, *, width: int = 1100, height: int = 3000, timeout: float = 90) -> Rendered:
    url = html.resolve().as_uri()
    shot = _run([f"--screenshot={screenshot}", f"--window-size={width},{height}", url], timeout)
    if shot.returncode != 0 or not screenshot.exists():
        raise RuntimeError(f"chromium screenshot failed ({shot.returncode}): {shot.stderr[-2000:]}")
    dom = _run(["--dump-dom", url], timeout)
    if dom.returncode != 0:
        raise RuntimeError(f"chromium --dump-dom failed ({dom.returncode}): {dom.stderr[-2000:]}")
    errors = [ln for ln in (shot.stderr + dom.stderr).splitlines() if CONSOLE_ERROR.search(ln)]
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    shutil.copy(screenshot, SCREENSHOT_DIR / screenshot.name)
    return Rendered(dom=dom.stdout, screenshot=screenshot, console_errors=errors)
