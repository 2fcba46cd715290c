"""One training step of a started run (docs/training.md lists its parts): its rollouts taken, their metrics, the
trajectories kept for training, and the policies' update and weight push (trainer/step/update.py)."""

from __future__ import annotations

import contextlib
import functools
import logging
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from alight.cost import cost_summary
from alight.evaluation import SUCCESS_AT
from alight_server.trainer.backends.policy_set import PolicySet
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.report.display import RunDisplay
from alight_server.trainer.report.metrics import MetricsLog
from alight_server.trainer.report.server import RunReporter
from alight_server.trainer.run.phases import RunPhases
from alight_server.trainer.run.quarantine import Quarantine, Screened
from alight_server.trainer.run.rollout_source import RolloutSource
from alight_server.trainer.run.rollouts import RolloutPhase
from alight_server.trainer.run.weight_sync import WeightSync
from alight_server.trainer.step.filters import filter_for_training
from alight_server.trainer.step.samples import SampleConfig
from alight_server.trainer.step.sft import needs_rewards, select_for_sft
from alight_server.trainer.step.update import step_policies

log = logging.getLogger("alight.trainer")


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """torch's CPU threads set to `threads` inside (unchanged when None); async runs keep decoding meanwhile."""
    if threads is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass(frozen=True)
class Started:
    """What a started run works with, each part built once what it needs exists (`TrainingRun._run`)."""

    backend: PolicySet  # of one without `policies:` (trainer/step/update.py)
    phases: RunPhases  # the step's and the validations' rollouts
    rollouts: RolloutSource  # each step's own groups, or (async_rollout) the groups in flight
    sync: WeightSync
    tokenizer: Any
    metrics_log: MetricsLog
    reporter: RunReporter  # the run and its steps, to the server's dashboard
    quarantine: Quarantine | None = None  # the review queue's side (`review:`); None when nothing is sampled


def train_step(
    live: Started, cfg: TrainConfig, step: int, policy_version: int, display: RunDisplay
) -> tuple[dict[str, float], int]:
    """Step `step + 1`: (its metrics, the policy version after it; `policy_version` when nothing learned)."""
    tokenizer = live.tokenizer
    taken = live.rollouts.take(step, policy_version, display)
    phase = taken.phase
    cost = cost_summary(phase.rollouts, phase.trajectories, cfg.prices, SUCCESS_AT)
    metrics = {**rollout_metrics(phase), **taken.metrics, **cost.metrics()}
    # Supervised steps on traces need no reward unless their selection reads one.
    if needs_rewards(cfg.algorithm.estimator, cfg.sft) and (hint := phase.no_reward_hint()):
        display.line(f"step {step + 1}: [yellow]{hint}[/]") if display.enabled else log.warning(hint)

    def status(text: str) -> None:
        display.status(f"step {step + 1} update: {text}")

    status("building samples and training")
    started = time.monotonic()
    sample_config = SampleConfig.from_section(cfg.samples, pad_token_id=int(tokenizer.pad_token_id or 0))
    # Queued rollouts held, dropped or kept (`review.flags`); groups decided since an earlier step join this one.
    screened = Screened(phase.trajectories, phase.rollouts)
    if live.quarantine is not None:
        screened = live.quarantine.screen(phase, step, policy_version)
        metrics.update(screened.metrics)
    trajectories, dropped = filter_for_training(screened.trajectories, sample_config)
    metrics.update(dropped)
    sft = cfg.algorithm.estimator == "sft"
    if sft:
        trajectories, chosen = select_for_sft(trajectories, {r.id: r for r in screened.rollouts}, cfg.sft)
        metrics.update(chosen)
    threads = functools.partial(
        torch_threads, None if live.rollouts.runs_during_training else cfg.trainer.torch_threads
    )
    update, version = step_policies(
        live.backend, trajectories, cfg, sample_config, decode=tokenizer.decode, sync=live.sync, step=step + 1,
        weights=taken.weights, policy_weights=taken.policy_weights, threads=threads, status=status,
    )  # fmt: skip
    if version is None:
        why = "no trajectory was selected (sft:)" if sft else "every group had equal rewards"
        display.line(f"step {step + 1}: {why}; nothing to learn, weights unchanged")
    policy_version = policy_version if version is None else version
    train_s = time.monotonic() - started - update.get("time/sync_s", 0.0)
    return {**metrics, **update, "time/train_s": train_s, "policy_version": float(policy_version)}, policy_version


def rollout_metrics(phase: RolloutPhase) -> dict[str, float]:
    """The step's rollouts: their rewards, how many ended how, and the generation's speed."""
    return {
        "train/reward_mean": statistics.fmean(phase.rewards) if phase.rewards else float("nan"),
        "train/reward_std": statistics.pstdev(phase.rewards) if len(phase.rewards) > 1 else 0.0,
        "train/reward_min": min(phase.rewards, default=float("nan")),
        "train/reward_max": max(phase.rewards, default=float("nan")),
        "rollouts/failed": float(phase.failed),
        "rollouts/cancelled": float(phase.cancelled),
        "rollouts/missing_reward": float(phase.missing_reward),
        "rollouts/timeout": float(phase.timeout),
        "rollouts/infra": float(phase.infra),
        "rollouts/rewarded": float(len(phase.rewards)),
        "perf/tokens_per_s": phase.generated_tokens / max(phase.seconds, 1e-9),
        "perf/generated_tokens": float(phase.generated_tokens),
        "time/rollouts_s": phase.seconds,
    }
