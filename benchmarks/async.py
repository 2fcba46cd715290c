"""Synchronous vs asynchronous training on heavy-tailed agent durations: wall time per step, speed-up, rewards.

The same run (tiny model, tasks_per_step groups of group_size rollouts, equal samples per step) three times:
synchronous, then asynchronous at max_staleness 1 and 2 (--staleness) with --active-groups groups in flight
(default 2 x tasks_per_step). Each agent waits a log-normal duration (median --median-s, sigma 0.6, a
--straggler-share of 10x stragglers) between two model calls (benchmarks/async_agent.py): its time is
spent waiting, as an agent waits on tools, not computing. The default median (5 s) keeps the waits well
above what an attempt costs the CPU besides (about 0.5 CPU-s measured: its start from a preloaded
zygote, the OpenAI client, telemetry, its exit), so the load is wait-bound as asynchronous mode assumes.
A step's wall time is its rollout wait + samples and train + weight sync. After each run the workload it
really drew is read back from its store: the waits, and what each attempt took beyond its wait. A wait is
drawn from the task's number and the rollout's index in its group, so the three runs face the same workload
(the asynchronous runs draw more: the groups that replace dropped ones).
Run: `nice .venv/bin/python benchmarks/async.py` (add --steps 3 --median-s 1 for a short look).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from async_agent import SIGMA, STRAGGLER_FACTOR, draw
from record import record

from alight.api_models import RolloutQuery
from alight.evaluation import Z, mean_and_error
from alight.schemas import Mode
from alight_server.stacks.opening import TrainingStacks
from alight_server.stacks.run_store import open_run_store
from alight_server.trainer.config.run import parse_config
from alight_server.trainer.run.loop import TrainingRun

AGENT = Path(__file__).parent / "async_agent.py"
WORDS = ["apple", "river", "stone", "cloud", "grass", "flame", "water", "stars"]


def run(label: str, args: argparse.Namespace, folder: Path, async_rollout: dict[str, Any]) -> dict[str, Any]:
    tasks = [
        {"word": w, "n": n, "median_s": args.median_s, "straggler_share": args.straggler_share}
        for n, w in enumerate(WORDS * 8)
    ]
    groups_in_flight = async_rollout.get("active_groups", args.tasks_per_step)
    raw = {
        "model": "tiny",
        "dataset": {"train": str(folder / "unused.jsonl")},
        "agent": {"entrypoint": f"{AGENT}:main"},
        "group_size": args.group_size,
        "tasks_per_step": args.tasks_per_step,
        "steps": args.steps,
        "seed": 0,
        "output_dir": str(folder / label.replace(" ", "")),
        "optimizer": {"lr": 1.5e-2},
        "algorithm": {"aggregation": "token_mean", **({"tis_cap": 2.0} if async_rollout else {})},
        "async_rollout": async_rollout,
        "inference": {"device": "cpu", "torch_threads": 1},
        "controller": {"concurrency": groups_in_flight * args.group_size, "preload": True},
        "checkpoint": {"every": 0},
        "metrics": {"tensorboard": False},
    }
    config = parse_config(raw, folder)
    started = time.monotonic()
    result = TrainingRun(config, stacks=TrainingStacks(), train_tasks=tasks, val_tasks=[], show_progress=False).run()
    total = time.monotonic() - started
    steps = [r for r in result.history if "train/reward_mean" in r]
    return {
        "label": label,
        "step_s": [r.get("time/rollouts_s", 0) + r.get("time/train_s", 0) + r.get("time/sync_s", 0) for r in steps],
        "wait_s": statistics.fmean(r.get("time/rollouts_s", 0) for r in steps),
        "train_s": statistics.fmean(r.get("time/train_s", 0) + r.get("time/sync_s", 0) for r in steps),
        "rewards": [r["train/reward_mean"] for r in steps],
        "dropped": sum(r.get("async/dropped_stale", 0) for r in steps),
        "staleness": statistics.fmean(r.get("async/staleness_mean", 0) for r in steps),
        "total_s": total,
        **workload(Path(config.output_dir), args),
    }


def workload(run_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """What the run's agents really did: each rollout's drawn wait, and its attempt's time beyond that wait."""
    store = open_run_store(run_dir)  # the key the run's server sealed its store under
    try:
        rollouts = store.list_rollouts(RolloutQuery(mode=Mode.TRAIN, limit=1000))
    finally:
        store.close()
    waits, beyond, stragglers = [], [], 0
    for rollout in rollouts:
        wait, straggler = draw(rollout.task, rollout.id)
        waits.append(wait)
        stragglers += straggler
        attempt = rollout.attempts[-1] if rollout.attempts else None
        if attempt is not None and attempt.ended_at is not None:
            beyond.append((attempt.ended_at - attempt.started_at).total_seconds() - wait)
    return {"rollouts": len(rollouts), "waits": waits, "stragglers": stragglers, "beyond_s": beyond}


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def report(runs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    base = statistics.fmean(runs[0]["step_s"])
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}, cpus {os.cpu_count()}")
    print(f"{args.steps} steps x {args.tasks_per_step} groups x {args.group_size} rollouts; async keeps "
          f"{args.active_groups} groups in flight; preloaded agent starts")  # fmt: skip
    print(f"workload: wait = log-normal(median {args.median_s} s, sigma {SIGMA}), {args.straggler_share:.0%} of "
          f"rollouts x{STRAGGLER_FACTOR:g}, between two model calls (4 and 8 tokens)")  # fmt: skip
    print(f"{'run':<10} {'rollouts':>8} {'wait p50':>8} {'p90':>6} {'max':>6} {'10x':>4} {'beyond wait p50/p90 s':>22}")
    for r in runs:
        waits, beyond = r["waits"], r["beyond_s"]
        print(f"{r['label']:<10} {r['rollouts']:8d} {quantile(waits, 0.5):8.2f} {quantile(waits, 0.9):6.2f} "
              f"{max(waits, default=0):6.1f} {r['stragglers']:4d} "
              f"{quantile(beyond, 0.5):13.2f} / {quantile(beyond, 0.9):5.2f}")  # fmt: skip
    print(f"\n{'run':<10} {'s/step':>7} {'speed-up':>8} {'wait s':>7} {'train+sync s':>12} {'staleness':>9} "
          f"{'dropped':>7} {'run s':>6} {'reward mean ± 2 SE':>18}")  # fmt: skip
    for r in runs:
        mean = statistics.fmean(r["step_s"])
        # each step's reward mean one sample (equal rollouts per step), printed as alight prints every ±
        reward, se = mean_and_error({str(step): [value] for step, value in enumerate(r["rewards"])})
        print(f"{r['label']:<10} {mean:7.2f} {base / mean:7.2f}x {r['wait_s']:7.2f} {r['train_s']:12.2f} "
              f"{r['staleness']:9.2f} {r['dropped']:7.0f} {r['total_s']:6.0f} {reward:11.3f} ± {Z * se:.3f}")  # fmt: skip
    print("\nper step (equal samples: tasks_per_step x group_size each): wall s | train/reward_mean")
    print("step " + " ".join(f"{r['label']:>10} s" for r in runs) + " " + " ".join(f"{r['label']:>10}" for r in runs))
    for i in range(args.steps):
        cells = [f"{r['step_s'][i]:12.2f}" if i < len(r["step_s"]) else " " * 12 for r in runs]
        cells += [f"{r['rewards'][i]:10.3f}" if i < len(r["rewards"]) else " " * 10 for r in runs]
        print(f"{i + 1:>4} " + " ".join(cells))


def recorded_what(args: argparse.Namespace) -> str:
    return (
        f"asynchronous vs synchronous training, {args.steps} steps x {args.tasks_per_step} groups x "
        f"{args.group_size} rollouts, {args.active_groups} groups in flight, log-normal waits (median "
        f"{args.median_s:g} s, {args.straggler_share:.0%} at {STRAGGLER_FACTOR:g}x), tiny model"
    )


def recorded_result(runs: list[dict[str, Any]]) -> str:
    """s/step of each run and the speed-up over the synchronous one, as the table prints them."""
    sync, *asynchronous = (statistics.fmean(r["step_s"]) for r in runs)
    speed_ups = ", ".join(
        f"{mean:.2f} {r['label']} ({sync / mean:.2f}x)" for r, mean in zip(runs[1:], asynchronous, strict=True)
    )
    return f"{sync:.2f} s/step sync, {speed_ups}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--tasks-per-step", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--active-groups", type=int, default=0, help="groups in flight (default 2 x tasks)")
    parser.add_argument("--median-s", type=float, default=5.0)
    parser.add_argument("--straggler-share", type=float, default=0.05)
    parser.add_argument(
        "--staleness", type=int, nargs="+", default=[1, 2], help="the asynchronous runs' max_staleness, one run each"
    )
    parser.add_argument(
        "--record", action="store_true", help="append the result to benchmarks/results.jsonl (benchmarks/record.py)"
    )
    args = parser.parse_args()
    args.active_groups = args.active_groups or 2 * args.tasks_per_step
    pool = {"enabled": True, "active_groups": args.active_groups}
    with tempfile.TemporaryDirectory(prefix="alight-async-bench-") as tmp:
        folder = Path(tmp)
        runs = [run("sync", args, folder, {})]
        runs += [run(f"async s={s}", args, folder, {**pool, "max_staleness": s}) for s in args.staleness]
    report(runs, args)
    if args.record:
        record("async", recorded_what(args), recorded_result(runs))


if __name__ == "__main__":
    main()
