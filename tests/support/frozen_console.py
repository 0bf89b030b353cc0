"""The console with its environment-dependent text pinned, for snapshots."""

from autorl_tui.tui.app import ConsoleApp
from tests.support.static_engine import T0


class FrozenConsole(ConsoleApp):
    def __init__(self, home, **kwargs):
        super().__init__(home, clock=lambda: T0 + 100, notify_events=False, **kwargs)
        self.machine = {"cpus": 2, "mem": 8 * 2**30}

    def status_line(self) -> str:
        text = super().status_line()
        pid = str(self.model.engine.get("pid", "?"))
        return text.replace(f"pid {pid}", "pid 4242").replace(str(self.home.root), "/home/op/.autorl")
