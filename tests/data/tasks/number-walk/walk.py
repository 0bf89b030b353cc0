"""One episode: walk from `start` to `target` with `up`/`down`."""

from dataclasses import dataclass, field


@dataclass
class Obs:
    text: str
    won: bool = False
    admissible: list = field(default_factory=lambda: ["up", "down"])

    @property
    def done(self):
        return self.won

    @property
    def reward(self):
        return 1.0 if self.won else 0.0


class Walk:
    task_type = "walk"

    def __init__(self, item):
        self.start, self.target = int(item["start"]), int(item["target"])
        self.task = f"reach {self.target}"

    def reset(self):
        self.at = self.start
        return Obs(f"You stand on {self.at}. Your task is to: {self.task}.")

    def step(self, action):
        self.at += 1 if action == "up" else -1
        return Obs(f"You stand on {self.at}.", won=self.at == self.target)

    def close(self):
        pass
