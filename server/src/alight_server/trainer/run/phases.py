"""A run's rollout phases: each step's train groups and each validation, named by run and step, awaited with progress.

Ids are a function of the run id and step (`{run}-s{step}`, `{run}-val{step}`, `{run}-reg{step}`,
`{run}-suite{step}`; ui/routes.py `step_prefix` reads them back), so creating a phase twice is harmless. Each
validation also runs the run's regression tasks (trainer/run/quarantine.py), scored apart as `regressions/*`,
and when due the frozen suite (trainer/run/regression_suite.py) as `regression/*`."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from alight.client import AlightClient
from alight.comparison import paired_difference
from alight.evaluation import scored, scores_by_task, success_and_error
from alight.schemas import Mode, Trajectory
from alight_server.trainer.config.policies import PolicyConfig
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.report.display import RunDisplay
from alight_server.trainer.run.dataset import TaskCursor, TaskSplits
from alight_server.trainer.run.quarantine import regression_tasks
from alight_server.trainer.run.regression_suite import RegressionSuite
from alight_server.trainer.run.rollouts import (
    Progress,
    RolloutPhase,
    collect,
    create_group_rollouts,
    score_and_error,
    wait_all,
)
from alight_server.trainer.step.integrity import integrity_metrics
from alight_server.trainer.step.policy_samples import named_reward, with_reward

log = logging.getLogger("alight.trainer")


@dataclass(frozen=True)
class StartedPhase:
    """Rollouts created for one phase, not yet waited for."""

    ids: list[str]
    started: float  # time.monotonic() at creation
    label: str  # what the display calls it: "step 3 rollouts", "validation before training"


def val_task_count(config: TrainConfig, splits: TaskSplits) -> int:
    """How many held-out tasks one validation runs (`validation.max_tasks`, 0: all)."""
    limit = config.validation.max_tasks
    return min(limit, len(splits.val)) if limit else len(splits.val)


def policy_scores(trajectories: Sequence[Trajectory], policies: Mapping[str, PolicyConfig]) -> dict[str, float]:
    """`policy/<name>/val/score` (and `_se`) for each policy with a named reward, scored as `val/score` scores the
    final one, and `policy/<name>/val/rewarded`: how many rollouts reported it."""
    metrics: dict[str, float] = {}
    for name, policy in policies.items():
        if policy.reward is None:
            continue
        score, error = score_and_error([with_reward(t, policy.reward) for t in trajectories])
        metrics[f"policy/{name}/val/score"], metrics[f"policy/{name}/val/score_se"] = score, error
        rewarded = sum(named_reward(t, policy.reward) is not None for t in trajectories)
        metrics[f"policy/{name}/val/rewarded"] = float(rewarded)
    return metrics


@dataclass
class RunPhases:
    """Creates a run's train and validation rollouts and waits for them, showing progress on the display."""

    client: AlightClient
    config: TrainConfig
    run_id: str
    run_dir: Path
    splits: TaskSplits
    cursor: TaskCursor
    # The first validation's scores by task (its index in the held-out split), to pair the later ones with.
    first_val: dict[str, list[float]] | None = field(default=None, init=False)
    suite: RegressionSuite | None = field(default=None, init=False)  # `regression:`; None without its tasks

    def __post_init__(self) -> None:
        self.suite = RegressionSuite.load(self.config.regression)

    def start(self, prefix: str, tasks: list[Any], n: int, mode: Mode, step: int, label: str) -> StartedPhase:
        cfg = self.config
        started = time.monotonic()
        created = create_group_rollouts(
            self.client, prefix, tasks, n, mode, cfg.agent, cfg.rollout_timeout_s, cfg.max_attempts,
            {"step": step, "run_dir": str(self.run_dir)},
        )  # fmt: skip
        return StartedPhase([r.id for r in created], started, label)

    def start_train(self, step: int) -> StartedPhase:
        """The step's `tasks_per_step` next tasks, `group_size` rollouts each."""
        tasks = self.cursor.take(self.config.tasks_per_step)
        label = f"step {step + 1} rollouts"
        return self.start(f"{self.run_id}-s{step:05d}", tasks, self.config.group_size, Mode.TRAIN, step, label)

    def start_validation(self, step: int) -> StartedPhase | None:
        """The validation at `step` (0: before training); None when there are no held-out tasks."""
        tasks = self.splits.val[: val_task_count(self.config, self.splits)]
        if not tasks:
            return None
        n = self.config.validation.samples_per_task
        label = "validation before training" if step == 0 else f"validation after step {step}"
        return self.start(f"{self.run_id}-val{step:05d}", tasks, n, Mode.VAL, step, label)

    def start_regressions(self, step: int) -> StartedPhase | None:
        """The run's regression tasks once each, in val mode; None while there are none."""
        tasks = regression_tasks(self.run_dir)
        if not tasks:
            return None
        return self.start(f"{self.run_id}-reg{step:05d}", tasks, 1, Mode.VAL, step, f"regression tasks at step {step}")

    def start_suite(self, step: int, last: bool) -> StartedPhase | None:
        """The frozen suite's tasks and the run's regression tasks, in val mode; None when no suite is due."""
        if self.suite is None or not self.suite.due(step, last):
            return None
        tasks = [*self.suite.tasks, *regression_tasks(self.run_dir)]
        n = self.suite.config.samples_per_task
        return self.start(
            f"{self.run_id}-suite{step:05d}", tasks, n, Mode.VAL, step, f"regression suite at step {step}"
        )

    def paired_with_first(self, step: int, trajectories: list[Trajectory]) -> dict[str, float]:
        """`val/score_gain` and `_se`: this validation's mean reward against the run's first, paired by task; {} for
        the first one, and after a resume (the first one's scores by task are not checkpointed)."""
        # A validation's group ids are {run}-val{step}-t{index}: the index names the held-out task.
        by_task = {group.rpartition("-")[2]: scores for group, scores in scores_by_task(trajectories).items()}
        if step == 0:
            self.first_val = by_task
            return {}
        if self.first_val is None:
            return {}
        gain, error, _ = paired_difference(self.first_val, by_task)
        return {"val/score_gain": gain, "val/score_gain_se": error}

    def wait(self, phase: StartedPhase, display: RunDisplay) -> RolloutPhase:
        def show(p: Progress) -> None:
            display.status(f"{phase.label}: {p}")

        show(Progress(total=len(phase.ids), finished=0, failed=0))

        def unclaimed(seconds: float) -> None:
            hint = (
                f"no rollout has started after {seconds:.0f} s: is `alight controller --server "
                f"{self.client.base_url}` running?"
            )
            display.line(f"[yellow]{hint}[/]") if display.enabled else log.warning(hint)

        return collect(self.client, wait_all(self.client, phase.ids, show, on_unclaimed=unclaimed), phase.started)

    def validate(
        self, display: RunDisplay, step: int, started: StartedPhase | None = None, last: bool = False
    ) -> dict[str, float]:
        """Run (or finish, when `started`) the validation at `step`, the regression tasks and the frozen suite
        when due (`last`: the run's last validation); their metrics, {} without held-out and regression tasks."""
        regressions = self.start_regressions(step)
        suite = self.start_suite(step, last)
        metrics: dict[str, float] = {}
        if started is not None or (started := self.start_validation(step)) is not None:
            phase = self.wait(started, display)
            score, error = score_and_error(phase.trajectories)
            success, success_error = success_and_error(phase.trajectories)
            metrics = {
                "val/score": score,
                "val/score_se": error,
                "val/success": success,
                "val/success_se": success_error,
                "val/rollouts": float(sum(scored(t) is not None for t in phase.trajectories)),
                "time/val_s": phase.seconds,
                **policy_scores(phase.trajectories, self.config.policies),
                **self.paired_with_first(step, phase.trajectories),
            }
        if regressions is not None:
            again = self.wait(regressions, display).trajectories
            caught = integrity_metrics(again)
            metrics["regressions/tasks"] = float(len(again))
            metrics["regressions/score"] = score_and_error(again)[0]
            metrics["regressions/violation_share"] = caught["integrity/violation_share"]
            metrics["regressions/flag_share"] = caught["integrity/flag_share"]
        if suite is not None and self.suite is not None:
            phase = self.wait(suite, display)
            metrics.update(self.suite.metrics(self.client, phase.rollouts, self.config.prices))
        return metrics
