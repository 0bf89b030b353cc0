"""Packing efficiency of the GPU scheduling policy against plain FIFO.

8 declared GPUs (ids only), seeded workloads of mixed 1/2/4-GPU runs (60/25/15 %), budgets of
30-120 min and real durations 50-100 % of the budget. Efficiency = busy GPU-time / available
GPU-time over the makespan. Also the mean wait of the 4-GPU runs (starvation check)."""

import sys
from pathlib import Path
from statistics import mean

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autorl_tui.engine.scheduling import Policy  # noqa: E402
from autorl_tui.engine.scheduling_sim import simulate, workload  # noqa: E402

GPUS = [str(i) for i in range(8)]
SEEDS = (1, 2, 3, 4)
SHAPES = {"batch": 0.0, "stream": 600.0}     # all queued at once / Poisson arrivals every 10 min

totals = {"backfill": [], "fifo": []}
for shape, interarrival in SHAPES.items():
    for seed in SEEDS:
        jobs = workload(seed, n_jobs=100, mean_interarrival=interarrival)
        big = [j for j in jobs if j.gpus == 4]
        for name, policy in (("backfill", Policy()), ("fifo", Policy(backfill=False))):
            r = simulate(jobs, GPUS, policy)
            totals[name].append(r.efficiency)
            waits = r.waits(big)
            print(f"sched_{shape}_s{seed}_{name}_efficiency: {r.efficiency:.3f} ratio")
            print(f"sched_{shape}_s{seed}_{name}_makespan: {r.makespan / 3600:.2f} h")
            print(f"sched_{shape}_s{seed}_{name}_4gpu_mean_wait: {mean(waits.values()) / 3600:.2f} h")
for name, values in totals.items():
    print(f"sched_mean_{name}_efficiency: {mean(values):.3f} ratio")
print(f"sched_mean_gain_over_fifo: {100 * (mean(totals['backfill']) - mean(totals['fifo'])):.1f} points")
