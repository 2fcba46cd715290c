"""A training step's update: samples per policy, then a step and a push for each that learns.

A one-policy run is a set of one whose metrics are the step's own. With `policies:` each policy's rows come from
the calls routed to it (`split_by_policy`), a trainable policy with signal steps and is pushed alone (the gateway
pauses only its calls), and metrics are totals plus `policy/<name>/<key>` (docs/training.md#several-policies)."""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import torch

from alight.schemas import Trajectory
from alight_server.trainer.backends.policy_set import ONE_POLICY, PolicySet
from alight_server.trainer.config.policies import ResolvedPolicy
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.run.weight_sync import WeightSync
from alight_server.trainer.step.algorithm import uniform_groups
from alight_server.trainer.step.policy_samples import split_by_policy
from alight_server.trainer.step.rendered import rows_for_step
from alight_server.trainer.step.samples import SampleBatch, SampleConfig, build_samples

SUMMED = ("samples/rows", "samples/breaks", "train/groups", "train/uniform_groups", "time/sync_s")


def step_policies(
    policies: PolicySet,
    trajectories: Sequence[Trajectory],
    config: TrainConfig,
    sample_config: SampleConfig,
    *,
    decode: Callable[..., str],
    sync: WeightSync,
    step: int,
    weights: dict[str, float] | None = None,
    policy_weights: dict[str, dict[str, float]] | None = None,
    threads: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    status: Callable[[str], object] = lambda _: None,
) -> tuple[dict[str, float], int | None]:
    """Step and push every trainable policy with signal; (step metrics, the new global version or None).
    `weights` / `policy_weights` (async training): each group's loss weight, for every policy / per policy."""
    if policies.named:
        split, metrics = split_by_policy(list(trajectories), config.policies)
    else:
        split, metrics = {ONE_POLICY: list(trajectories)}, {}
    stepped: list[dict[str, float]] = []
    version: int | None = None
    for policy in policies.policies.values():
        group_weights = weights if policy_weights is None else policy_weights.get(policy.name)
        batch, keep, own = _policy_rows(policy, split.get(policy.name, []), sample_config, decode, group_weights)
        if policy.trainable and keep:
            with threads():
                trained = {f"train/{k}": v for k, v in policies.backends[policy.name].step(batch.select(keep)).items()}
            own.update(trained)
            stepped.append(trained)
            status("syncing weights")
            version, own["time/sync_s"] = policies.push(sync, policy.name, {"step": step})
            if sync.last_drain is not None:
                own["sync/in_flight_at_pause"] = float(sync.last_drain.in_flight_at_pause)
                own["sync/drain_s"] = sync.last_drain.seconds
                own["sync/drain_timed_out"] = float(sync.last_drain.timed_out)
        if not policies.named:  # one policy: its metrics are the step's
            metrics.update(own)
            continue
        rewards = batch.rollout_reward.tolist() if batch.rollout_ids else []
        own["train/reward_mean"] = statistics.fmean(rewards) if rewards else float("nan")
        own["policy_version"] = float(policies.own_versions[policy.name])
        metrics.update({f"policy/{policy.name}/{key}": value for key, value in own.items()})
        metrics.update({key: metrics.get(key, 0.0) + own[key] for key in SUMMED if key in own})
    metrics.update(_combined(stepped))
    return metrics, version


def _policy_rows(
    policy: ResolvedPolicy,
    trajectories: list[Trajectory],
    sample_config: SampleConfig,
    decode: Callable[..., str],
    group_weights: dict[str, float] | None,
) -> tuple[SampleBatch, list[int], dict[str, float]]:
    """One policy's rows for its step: (the batch, the rows it learns from, its sample metrics). A policy-gradient
    policy skips the rows of uniform groups; `group_weights` (async training) down-weights stale groups."""
    batch, report = build_samples(trajectories, sample_config, decode=decode)
    batch, own = rows_for_step(batch, policy.algorithm)  # a fresh dict: the policy's own metrics start with it
    if group_weights is not None and batch.num_rows:  # async: stale groups down-weighted
        per_group = torch.tensor([group_weights.get(g, 1.0) for g in batch.group_ids], dtype=torch.float32)  # (G,)
        batch.row_weight = per_group[batch.row_group]  # (R,)
    uniform = uniform_groups(batch.rollout_reward, batch.rollout_group) if batch.rollout_ids else torch.zeros(0)
    own["train/groups"] = float(len(batch.group_ids))
    own["train/uniform_groups"] = float(uniform.sum())
    own["samples/rows"] = float(batch.num_rows)
    own["samples/breaks"] = float(report.total_breaks)
    # sft learns from each selected row alone, and a teacher scores every token: equal rewards take nothing away
    alone = policy.algorithm.estimator == "sft" or policy.algorithm.distill is not None
    keep = [r for r in range(batch.num_rows) if alone or not bool(uniform[int(batch.row_group[r])])]
    return batch, keep, own


def _combined(stepped: list[dict[str, float]]) -> dict[str, float]:
    """The stepped policies' `train/*` metrics as one: maxima of `_max` keys, means of the rest."""
    keys = {key for metrics in stepped for key in metrics}
    out: dict[str, float] = {}
    for key in keys:
        values = [metrics[key] for metrics in stepped if key in metrics]
        out[key] = max(values) if key.endswith("_max") else statistics.fmean(values)
    return out
