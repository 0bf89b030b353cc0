"""What a run's supervisor (and its grading and agent watch) may use of the engine that hosts it:
a narrow protocol, so that the supervisor does not import the engine (which imports the
supervisor to start runs)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:   # annotations only: these modules import nothing of the engine
    from autorl_tui.engine.events import EventBus
    from autorl_tui.grading_host.grading_queue import GradingQueue
    from autorl_tui.engine.scheduling import RetryPolicy
    from autorl_tui.home import Home
    from autorl_tui.store.db import Store


class RunHost(Protocol):
    home: "Home"
    store: "Store"
    bus: "EventBus"
    retry_policy: "RetryPolicy"
    grader_threads: int
    grading_queue: "GradingQueue"

    def agent_search_path(self) -> list[Path]: ...
    def executor(self, name: str) -> Any: ...
    def agent_uid_for(self, path: Path) -> int | None: ...
    def baseline_lock(self, key: tuple) -> asyncio.Lock: ...
    def private_paths(self) -> list[Path]: ...
    def make_parser(self, output_format: str) -> Any: ...
    def gpu_samples(self, gpus: list[str]) -> list[dict] | None: ...
    def supervisor_finished(self, sup: Any) -> None: ...
