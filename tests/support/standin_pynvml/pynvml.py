"""`import pynvml` for a subprocess under test (put this folder first on PYTHONPATH): the pynvml
API over the box described in $STANDIN_NVML (JSON list of tests/support/nvml_standin.Card fields).
NVML cannot run without an NVIDIA driver; everything above it runs for real."""

import json
import os

from tests.support.nvml_standin import Card, StandInNvml

_box = StandInNvml([Card(**c) for c in json.loads(os.environ.get("STANDIN_NVML", "[]"))])
NVML_DEVICE_MIG_ENABLE = 1


def __getattr__(name):
    return getattr(_box, name)
