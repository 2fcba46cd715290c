"""`alight eval`: the policy on the validation tasks, no training; and the same report over a run's store."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from alight.api_models import RolloutQuery
from alight.commands.console import output_console
from alight.cost import Prices
from alight.evaluation import EvalReport, build_report, scored
from alight.schemas import Event, Mode, Rollout, RolloutState, Trajectory
from alight_server.stacks.run_store import open_run_store
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.report.display import RunDisplay
from alight_server.trainer.run.rollouts import Progress, create_group_rollouts, wait_all
from alight_server.trajectories.join import build_trajectory


def _report(
    rollouts: Sequence[Rollout],
    trajectory: Callable[[str], Trajectory],
    events: Callable[[str], list[Event]],
    prices: Prices | None,
) -> EvalReport:
    """The report over `rollouts`, each that ran read by id with `trajectory` and `events` (exact: token counts)."""
    done = [r for r in rollouts if r.state != RolloutState.CANCELLED and r.attempts]
    return build_report(
        rollouts, [trajectory(r.id) for r in done], [e for r in done for e in events(r.id)], prices=prices
    )


def validation_reports(run_dir: Path) -> dict[int, EvalReport]:
    """Per step, the report over a finished run's validation rollouts (its embedded SQLite store)."""
    if not (run_dir / "alight.db").is_file():
        return {}
    run_json = run_dir / "run.json"  # the run's config, with its price table
    priced = json.loads(run_json.read_text()).get("config", {}).get("prices") if run_json.is_file() else None
    prices = Prices.model_validate(priced) if priced else None
    store = open_run_store(run_dir)  # with the data keys the run's server sealed its content under
    try:
        by_step: dict[int, list[Rollout]] = {}
        since = 0
        while page := store.list_rollouts(RolloutQuery(mode=Mode.VAL, since_seq=since, limit=500)):
            since = page[-1].seq
            for rollout in page:
                step = int(rollout.metadata.get("step", -1))
                # a validation's rollout (trainer/run/phases.py names them), not a regression task's or an
                # `alight eval --into-run` one's: the report agrees with the before/after table's rows
                if f"-val{step:05d}-" in rollout.id:
                    by_step.setdefault(step, []).append(rollout)
        trajectory = partial(build_trajectory, store)
        return {step: _report(found, trajectory, store.list_events, prices) for step, found in sorted(by_step.items())}
    finally:
        store.close()


def _stack(config: TrainConfig, run_dir: Path) -> Any:
    """The stack the config names: your server (server.url), else the embedded one on the config's model, its
    store, keys and logs in `run_dir`."""
    import torch

    from alight_server.stacks.kinds import EmbeddedStack, ExternalStack
    from alight_server.stacks.opening import stack_options
    from alight_server.trainer.run.policy_engine import engine_adapters, policy_engine

    run_dir.mkdir(parents=True, exist_ok=True)
    if config.inference.torch_threads:
        torch.set_num_threads(config.inference.torch_threads)
    if config.server.url is not None:
        return ExternalStack(config.server, config.model, run_dir, config.evaluator)
    return EmbeddedStack(
        policy_engine(config.model, config.inference, engine_adapters(config)), run_dir, **stack_options(config)
    )


def run_rollouts(
    config: TrainConfig, label: str, tasks: Sequence[Any], n: int, mode: Mode, run_dir: Path | None = None
) -> tuple[EvalReport, list[list[float | None]]]:
    """`n` rollouts of each task on a fresh stack whose store is in `run_dir` (default: the config's output_dir):
    the report over all of them, and each task's scores (None for an infra failure or timeout, which says nothing
    about the policy)."""
    if not tasks:
        raise ValueError("no tasks to run")
    # Progress on stderr (a bar on a terminal, else a heartbeat line), so stdout keeps only the report.
    display = RunDisplay(len(tasks) * n, output_console(stderr=True), unit="rollouts")

    def show(p: Progress) -> None:
        display.status(f"{label}: {p}", completed=p.finished)

    display.status(f"{label}: starting the policy's stack")
    with display, _stack(config, Path(config.output_dir) if run_dir is None else run_dir) as stack:
        client = stack.client
        assert client is not None
        prefix = f"{label}-{time.strftime('%Y%m%d-%H%M%S')}"
        created = create_group_rollouts(
            client, prefix, tasks, n, mode, config.agent, config.rollout_timeout_s, config.max_attempts, {label: prefix},
        )  # fmt: skip
        show(Progress(total=len(created), finished=0, failed=0))
        finished = wait_all(client, [r.id for r in created], show)
        display.status(f"{label}: reading {len(finished)} trajectories")
        exact = partial(client.trajectory, reveal=True), partial(client.list_events, reveal=True)
        report = _report(finished, *exact, config.prices)
        scores: list[list[float | None]] = [[] for _ in tasks]
        for rollout in finished:
            index = int(rollout.metadata["task_index"])
            scores[index].append(scored(client.trajectory(rollout.id, reveal=True)) if rollout.attempts else None)
        display.status(f"{label}: {len(finished)} rollouts done")
        return report, scores


def run_eval(config: TrainConfig, run_dir: Path, val_tasks: Any = None) -> EvalReport:
    """The validation tasks (validation.max_tasks of them), validation.samples_per_task times each, in val mode,
    on a stack whose store, keys and logs are in `run_dir` (`alight eval`'s folder, commands/eval.py)."""
    from alight_server.trainer.run.dataset import load_splits

    splits = load_splits(config.dataset, config.seed, None, val_tasks)
    limit = config.validation.max_tasks
    tasks = splits.val[:limit] if limit else splits.val
    if not tasks:
        raise ValueError("no validation tasks: set dataset.val (or dataset.val_size) in the config")
    return run_rollouts(config, "eval", tasks, config.validation.samples_per_task, Mode.VAL, run_dir)[0]
