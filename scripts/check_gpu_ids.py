"""On a machine with NVIDIA GPUs (the lead's device check; needs nvidia-ml-py): the device ids the
harness hands out name the cards nvidia-smi names. Prints one JSON line per check and exits 1 if
any fails. Usage: python scripts/check_gpu_ids.py"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from autorl_tui.executors.ray_node import nvml_probe
from autorl_tui.executors.gpus import device_uuids, discover


def smi() -> list[tuple[str, str]]:
    out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"], capture_output=True,
                         text=True, check=True).stdout
    return [tuple(x.strip() for x in line.split(",")) for line in out.splitlines() if line.strip()]


def main() -> int:
    failures = 0

    def check(name: str, ok: bool, **detail) -> None:
        nonlocal failures
        failures += not ok
        print(json.dumps({"check": name, "ok": ok, **detail}))

    try:
        cards = smi()
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"check_gpu_ids: nvidia-smi cannot list GPUs here ({exc}); run this on a machine with NVIDIA GPUs",
              file=sys.stderr)
        return 2
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    inv = discover(env=env)
    check("nvml probe", nvml_probe()[0], why=nvml_probe()[1])
    check("discovery = nvidia-smi (index, uuid)", [(g.id, g.uuid) for g in inv.gpus] == cards,
          found=[(g.id, g.uuid) for g in inv.gpus], smi=cards)
    last = cards[-1]
    narrowed = discover(env=dict(env, CUDA_VISIBLE_DEVICES=last[0]))
    check("CUDA_VISIBLE_DEVICES narrows by index", narrowed.ids == [last[0]], ids=narrowed.ids)
    by_uuid = discover(env=dict(env, CUDA_VISIBLE_DEVICES=last[1]))
    check("CUDA_VISIBLE_DEVICES narrows by UUID", by_uuid.ids == [last[0]], ids=by_uuid.ids)
    check("docker device requests get UUIDs", device_uuids([c[0] for c in cards]) == [c[1] for c in cards])
    probe = ("import torch, json; p = torch.cuda.get_device_properties(0); "
             "print(json.dumps(str(getattr(p, 'uuid', ''))))")
    seen = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=dict(env, CUDA_VISIBLE_DEVICES=last[0], CUDA_DEVICE_ORDER="PCI_BUS_ID"))
    torch_uuid = json.loads(seen.stdout or '""')
    check("child with CUDA_DEVICE_ORDER=PCI_BUS_ID opens the same card", not torch_uuid or
          last[1].endswith(torch_uuid.replace("GPU-", "")) or torch_uuid in last[1], torch=torch_uuid, smi=last[1],
          stderr=seen.stderr[-300:])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
