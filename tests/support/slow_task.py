"""arith-small with a dev split large enough that a grading of the tiny model lasts a while (its
progress is reported as it goes): for tests of what happens during, or because of, a long grading."""

import shutil
from pathlib import Path

import yaml

from tests.support.harness import TASKS


def slow_task(tmp_path: Path, dev_n: int, task_id: str = "arith-slow") -> Path:
    """A tasks folder holding `task_id`: arith-small with `dev_n` dev items graded 4 at a time."""
    tasks = tmp_path / "tasks"
    shutil.copytree(TASKS / "arith-small", tasks / task_id)
    card = yaml.safe_load((tasks / task_id / "task.yaml").read_text())
    card["id"] = task_id
    card["data"]["splits"]["dev"]["n"] = dev_n
    card["protocol"]["batch_size"] = 4
    card["budget"] = "10m"
    (tasks / task_id / "task.yaml").write_text(yaml.safe_dump(card))
    return tasks
