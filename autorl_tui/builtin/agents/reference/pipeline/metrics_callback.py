"""Writes TRL/transformers log records to the workspace's metrics file (logs/metrics.jsonl):
one JSON object a line, {"ts", "step", "phase", "metrics": {TRL key names: loss, reward, kl, ...}}."""
import json
import os
import time

from transformers import TrainerCallback


class MetricsFileCallback(TrainerCallback):
    def __init__(self, phase, path=None):
        self.phase = phase
        self.path = path or os.environ.get("METRICS_FILE", "logs/metrics.jsonl")
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)

    def on_log(self, args, state, control, logs=None, **kwargs):
        metrics = {k: float(v) for k, v in (logs or {}).items() if isinstance(v, (int, float)) and k != "epoch"}
        if metrics:
            with open(self.path, "a") as fh:
                fh.write(json.dumps({"ts": time.time(), "step": state.global_step, "phase": self.phase,
                                     "metrics": metrics}) + "\n")


class StopAt(TrainerCallback):
    """Ends training cleanly (the model is still saved) once wall-clock time passes `stop_at`."""

    def __init__(self, stop_at):
        self.stop_at = stop_at
        self.stopped_early = False

    def on_step_end(self, args, state, control, **kwargs):
        if self.stop_at and time.time() >= self.stop_at:
            control.should_training_stop = True
            self.stopped_early = True
