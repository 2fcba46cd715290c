"""Sample builder: trajectories in, padded training tensors out (docs/samples.md).

Trajectories without a usable final reward are dropped whole, calls are kept or dropped with a counted reason,
kept calls are merged into rows (merge.py), length limits drop or truncate rows, and rows are padded with their
recorded logprobs (batch.py). No retokenization anywhere: ids are the ones the backend consumed and produced."""

from __future__ import annotations

import fnmatch
import gc
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from pydantic import ConfigDict

from alight.schemas import RENDERED_FLAG, FailureKind, Trajectory, TrajectoryCall
from alight_server.trainer.config.sections import SamplesConfig
from alight_server.trainer.step.samples.batch import SampleBatch, pad_rows
from alight_server.trainer.step.samples.breaks import Decode
from alight_server.trainer.step.samples.merge import AttemptRows, Segment
from alight_server.trainer.step.samples.report import BuildReport


class SampleConfig(SamplesConfig):
    """The builder's settings: a training config's `samples:` section (every field and check defined there, the
    filter's thresholds among them), and the tokenizer's pad id and how many break examples a report keeps."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pad_token_id: int = 0
    max_break_examples: int = 5

    @classmethod
    def from_section(cls, section: SamplesConfig, **settings: Any) -> SampleConfig:
        """`section` (the trainer's or the dashboard's) with `settings` added."""
        return cls.model_validate({**section.model_dump(), **settings})


def build_samples(
    trajectories: Sequence[Trajectory], config: SampleConfig | None = None, decode: Decode | None = None
) -> tuple[SampleBatch, BuildReport]:
    """Turn trajectories (one attempt per rollout) into a `SampleBatch` and a `BuildReport`; `decode` (e.g.
    `tokenizer.decode`) lets the break classifier tell retokenization from template drift."""
    # The builder makes many small objects while millions of token ids sit in live lists; each full collection
    # would walk them all for nothing (the builder makes no reference cycles), costing up to half the build time.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _build(trajectories, config or SampleConfig(), decode)
    finally:
        if collecting:
            gc.enable()


def _build(
    trajectories: Sequence[Trajectory], config: SampleConfig, decode: Decode | None
) -> tuple[SampleBatch, BuildReport]:
    report = BuildReport(mode=config.mode)
    rows: list[tuple[int, list[Segment]]] = []  # (rollout index, segments) in output order
    rollout_ids: list[str] = []
    rollout_rewards: list[float] = []
    rollout_groups: list[str] = []
    seen: dict[str, int] = {}  # rollout id -> attempt
    for trajectory in trajectories:
        report.trajectories += 1
        report.calls += len(trajectory.calls)
        reward, reason = _reward_or_drop_reason(trajectory)
        if reward is None:
            report.dropped_rollouts[reason] += 1
            report.dropped_calls[f"rollout_{reason}"] += len(trajectory.calls)
            continue
        if trajectory.rollout_id in seen:
            raise ValueError(
                f"rollout {trajectory.rollout_id!r} appears twice (attempts {seen[trajectory.rollout_id]} and "
                f"{trajectory.attempt}); pass one trajectory per rollout: the attempt that finished"
            )
        seen[trajectory.rollout_id] = trajectory.attempt
        rollout_ids.append(trajectory.rollout_id)
        rollout_rewards.append(reward)
        rollout_groups.append(trajectory.group_id or f"rollout:{trajectory.rollout_id}")
        attempt_rows = merge_attempt(trajectory, config, report, decode)
        if config.mode == "trajectory":
            rows.extend((len(rollout_ids) - 1, row.segments) for row in attempt_rows.rows)
        else:
            kept = sorted((s for row in attempt_rows.rows for s in row.segments), key=lambda s: s.call.seq)
            rows.extend((len(rollout_ids) - 1, [s]) for s in kept)
    report.rollouts = len(rollout_ids)
    rows = [row for row in rows if _within_limits(row[1], config, report)]
    batch = pad_rows(rows, rollout_ids, rollout_rewards, rollout_groups, config.pad_token_id)
    report.rows, report.calls_used = batch.num_rows, sum(len(segments) for _, segments in rows)
    report.tokens, report.trained_tokens = int(batch.attention_mask.sum()), int(batch.loss_mask.sum())
    return batch, report


def merge_attempt(
    trajectory: Trajectory, config: SampleConfig, report: BuildReport, decode: Decode | None = None
) -> AttemptRows:
    """One attempt's kept calls merged into rows (merge.py); `report` counts the drops, conversations and breaks."""
    rows = AttemptRows(report, decode, config.max_break_examples)
    for segment in _kept_segments(trajectory, config, report):
        rows.add(segment)
    return rows


def prefix_breaks(trajectory: Trajectory, config: SampleConfig, decode: Decode | None = None) -> int:
    """Prefix breaks in one attempt as the builder counts them (calls that start a row without being a new
    conversation): the filter's `samples.max_prefix_breaks` counts with this, as the builder would split."""
    report = BuildReport(mode=config.mode)
    merge_attempt(trajectory, config, report, decode)
    return report.total_breaks


def _reward_or_drop_reason(trajectory: Trajectory) -> tuple[float | None, str]:
    """The rollout's final reward, or None and why the whole trajectory is left out."""
    kind = trajectory.failure_kind
    if kind is not None and kind in (FailureKind.INFRA, FailureKind.TIMEOUT):
        return None, f"{kind.value}_failure"  # retried elsewhere; never a made-up reward
    reward = trajectory.final_reward
    if reward is None:
        return None, "no_reward"
    if not math.isfinite(reward):
        return None, "non_finite_reward"
    return float(reward), ""


def _kept_segments(trajectory: Trajectory, config: SampleConfig, report: BuildReport) -> list[Segment]:
    calls = sorted(trajectory.calls, key=lambda tc: tc.call.seq)
    step = np.array([sum(r.value for r in tc.rewards if not r.final) for tc in calls], dtype=np.float64)
    to_go = np.cumsum(step[::-1])[::-1]  # step rewards of this call and every later one
    segments = []
    for tc, step_return in zip(calls, to_go, strict=True):
        reason = _call_drop_reason(tc, config)
        if reason:
            report.dropped_calls[reason] += 1
            continue
        call = tc.call
        # A rendered call has no recorded logprobs: 0 by the padding's convention, and its row says so.
        logprobs = [0.0] * len(call.response_token_ids) if call.rendered else call.response_logprobs
        segments.append(Segment(call, call.prompt_token_ids, call.response_token_ids, logprobs, float(step_return)))
    return segments


def _call_drop_reason(tc: TrajectoryCall, config: SampleConfig) -> str | None:
    call = tc.call
    asked = str(call.request.get("model"))
    if config.agents and not _under_agent(tc, config.agents):
        return "agent_filter"
    if config.exclude_models and any(fnmatch.fnmatchcase(asked, p) for p in config.exclude_models):
        return "model_filter"
    flags = [flag for flag in call.flags if flag != RENDERED_FLAG]  # fidelity is no fault (SampleBatch.row_rendered)
    if flags:
        return "flagged:" + ",".join(sorted(flags))
    if call.status_code != 200:
        return f"http_{call.status_code}"
    if call.error:
        return "error"
    if not call.rendered and len(call.response_token_ids) != len(call.response_logprobs):
        return "logprob_length_mismatch"
    if not call.prompt_token_ids:
        return "empty_prompt"
    if not call.response_token_ids:
        return "empty_response"
    return None


def _under_agent(tc: TrajectoryCall, agents: Sequence[str]) -> bool:
    if tc.agent_name in agents:
        return True
    return any(span == name or span.endswith(f" {name}") for span in tc.span_path for name in agents)


def _within_limits(segments: list[Segment], config: SampleConfig, report: BuildReport) -> bool:
    """Apply the length limits to one row in place; False if the row is dropped."""
    prompt_length, length = segments[0].start, segments[-1].end
    if config.max_prompt_tokens is not None and prompt_length > config.max_prompt_tokens:
        _drop_row("prompt_too_long", segments, report)
        return False
    limit = None if config.max_response_tokens is None else prompt_length + config.max_response_tokens
    if limit is None or length <= limit:
        return True
    if config.overlong == "drop":
        _drop_row("response_too_long", segments, report)
        return False
    report.truncated_rows += 1
    report.truncated_tokens += length - limit
    kept = [s for s in segments if s.start < limit]
    for segment in segments[len(kept) :]:
        report.truncated_trained_tokens += len(segment.response)
        report.dropped_calls["truncated_away"] += 1
    last = kept[-1]
    cut = last.end - limit
    if cut > 0:
        report.truncated_trained_tokens += cut
        kept[-1] = replace(last, response=last.response[:-cut], logprobs=last.logprobs[:-cut])
    segments[:] = kept
    return True


def _drop_row(reason: str, segments: list[Segment], report: BuildReport) -> None:
    report.dropped_rows[reason] += 1
    report.dropped_row_tokens += segments[-1].end
    report.dropped_calls[f"row_{reason}"] += len(segments)
