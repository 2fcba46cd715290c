"""Synchronous vs asynchronous training on heavy-tailed agent durations: wall time per step, speed-up, rewards.

The same run (tiny model, tasks_per_step groups of group_size rollouts, equal samples per step) three times:
synchronous, then asynchronous at max_staleness 1 and 2 with 2 x tasks_per_step groups in flight. Each
agent sleeps a log-normal duration (median --median-s, a --straggler-share of 10x stragglers) between
two model calls (benchmarks/async_agent.py). A step's wall time is its rollout wait + train + weight sync.
Run: `nice .venv/bin/python benchmarks/async.py` (add --steps 4 for a short look).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from alight_server.trainer.config import parse_config
from alight_server.trainer.loop import TrainingRun

AGENT = Path(__file__).parent / "async_agent.py"
WORDS = ["apple", "river", "stone", "cloud", "grass", "flame", "water", "stars"]


def run(label: str, args: argparse.Namespace, folder: Path, async_rollout: dict[str, Any]) -> dict[str, Any]:
    tasks = [{"word": w, "median_s": args.median_s, "straggler_share": args.straggler_share} for w in WORDS * 8]
    groups_in_flight = async_rollout.get("active_groups", args.tasks_per_step)
    raw = {
        "model": "tiny",
        "dataset": {"train": str(folder / "unused.jsonl")},
        "agent": {"entrypoint": f"{AGENT}:main"},
        "group_size": args.group_size,
        "tasks_per_step": args.tasks_per_step,
        "steps": args.steps,
        "seed": 0,
        "output_dir": str(folder / label),
        "optimizer": {"lr": 1.5e-2},
        "algorithm": {"aggregation": "token_mean", **({"tis_cap": 2.0} if async_rollout else {})},
        "async_rollout": async_rollout,
        "inference": {"device": "cpu", "torch_threads": 1},
        "controller": {"concurrency": groups_in_flight * args.group_size},
        "checkpoint": {"every": 0},
        "metrics": {"tensorboard": False},
    }
    started = time.monotonic()
    result = TrainingRun(parse_config(raw, folder), train_tasks=tasks, val_tasks=[], show_progress=False).run()
    steps = [r for r in result.history if "train/reward_mean" in r]
    per_step = [r.get("time/rollouts_s", 0) + r.get("time/train_s", 0) + r.get("time/sync_s", 0) for r in steps]
    return {
        "label": label,
        "step_s": per_step,
        "rewards": [r["train/reward_mean"] for r in steps],
        "dropped": sum(r.get("async/dropped_stale", 0) for r in steps),
        "staleness": statistics.fmean(r.get("async/staleness_mean", 0) for r in steps),
        "total_s": time.monotonic() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--tasks-per-step", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--median-s", type=float, default=2.0)
    parser.add_argument("--straggler-share", type=float, default=0.05)
    args = parser.parse_args()
    active = 2 * args.tasks_per_step
    with tempfile.TemporaryDirectory(prefix="alight-async-bench-") as tmp:
        folder = Path(tmp)
        runs = [
            run("sync", args, folder, {}),
            run("async s=1", args, folder, {"enabled": True, "active_groups": active, "max_staleness": 1}),
            run("async s=2", args, folder, {"enabled": True, "active_groups": active, "max_staleness": 2}),
        ]
    base = statistics.fmean(runs[0]["step_s"])
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}, cpus {os.cpu_count()}")
    print(f"{args.steps} steps x {args.tasks_per_step} groups x {args.group_size} rollouts; agent median "
          f"{args.median_s} s, {args.straggler_share:.0%} stragglers at 10x")  # fmt: skip
    print(f"{'run':<10} {'s/step':>7} {'speed-up':>8} {'staleness':>9} {'dropped':>7} {'run s':>6}")
    for r in runs:
        mean = statistics.fmean(r["step_s"])
        print(f"{r['label']:<10} {mean:7.2f} {base / mean:7.2f}x {r['staleness']:9.2f} {r['dropped']:7.0f} "
              f"{r['total_s']:6.0f}")  # fmt: skip
    print("\nreward per step (train/reward_mean)")
    print("step " + " ".join(f"{r['label']:>10}" for r in runs))
    for i in range(args.steps):
        print(
            f"{i + 1:>4} " + " ".join(f"{r['rewards'][i]:10.3f}" if i < len(r["rewards"]) else " " * 10 for r in runs)
        )


if __name__ == "__main__":
    main()
