"""The evaluation report: success and mean reward with clustered errors, tokens, latency, retries, tool errors, gates."""

from __future__ import annotations

import json
import math
import statistics
from datetime import UTC, datetime
from typing import Any

import pytest

from alight.comparison import COST_PER_SUCCESS, compare_reports, paired_difference, verdict
from alight.cost import Prices
from alight.evaluation import EvalReport, build_report, mean_and_error
from alight.schemas import (
    ApiFlavour,
    Attempt,
    AttemptStatus,
    Event,
    FailureKind,
    Mode,
    ModelCall,
    Reward,
    Rollout,
    RolloutState,
    Trajectory,
    TrajectoryCall,
)

NOW = datetime.now(UTC)


def rollout(i: int, attempts: int = 1) -> Rollout:
    tries = [
        Attempt(rollout_id=f"r{i}", attempt=a, status=AttemptStatus.SUCCEEDED, started_at=NOW)
        for a in range(1, attempts + 1)
    ]
    return Rollout(
        id=f"r{i}", mode=Mode.VAL, group_id=None, runner=None, timeout_s=60, max_attempts=2, metadata={},
        state=RolloutState.SUCCEEDED, policy_version=0, created_at=NOW, updated_at=NOW, seq=i, attempts=tries,
    )  # fmt: skip


def trajectory(
    i: int, reward: float | None, failure: FailureKind | None = None, latency: float = 100.0, status: int = 200
) -> Trajectory:
    call = ModelCall(
        id=f"c{i}", rollout_id=f"r{i}", attempt=1, seq=0, flavour=ApiFlavour.CHAT, request={}, status_code=status,
        prompt_token_ids=[1, 2, 3], response_token_ids=[4, 5], latency_ms=latency, created_at=NOW,
    )  # fmt: skip
    rewards = (
        []
        if reward is None
        else [Reward(id=f"w{i}", rollout_id=f"r{i}", attempt=1, value=reward, final=True, created_at=NOW)]
    )
    return Trajectory(
        rollout_id=f"r{i}", attempt=1, group_id=None, mode=Mode.VAL, state=RolloutState.SUCCEEDED, attempt_status=None,
        failure_kind=failure, calls=[TrajectoryCall(call=call)], rewards=rewards, final_reward=reward,
    )  # fmt: skip


def event(i: int, kind: str, **payload: Any) -> Event:
    return Event(
        id=f"e{i}{kind}{len(payload)}", rollout_id=f"r{i}", attempt=1, kind=kind, payload=payload, created_at=NOW
    )


def test_success_rate_has_the_clustered_standard_error_and_infra_failures_are_not_scored() -> None:
    trajectories = [
        trajectory(0, 1.0),
        trajectory(1, 0.0),
        trajectory(2, 1.0),
        trajectory(3, None),
        trajectory(4, None, FailureKind.INFRA),
    ]
    report = build_report([rollout(i) for i in range(5)], trajectories, [])
    assert (report.rollouts, report.scored, report.tasks, report.infra_failures) == (5, 4, 4, 1)
    assert report.success_rate == 0.5  # a task failure without a reward counts as 0
    # one sample per task (no group): the ordinary error of a mean, stdev / sqrt(n)
    assert math.isclose(report.success_se, statistics.stdev([1, 0, 1, 0]) / 2)


def test_a_tasks_samples_are_one_cluster_for_success_and_mean_reward() -> None:
    grouped = [
        trajectory(i, reward).model_copy(update={"group_id": task})
        for i, (task, reward) in enumerate([("a", 1.0), ("a", 1.0), ("b", 0.5), ("b", 0.0)])
    ]
    report = build_report([rollout(i) for i in range(4)], grouped, [])
    assert (report.tasks, report.success_rate, report.mean_reward) == (2, 0.5, 0.625)
    # task means: success 1.0 and 0.0, mean reward 1.0 and 0.25; the error is their spread over sqrt(2) tasks
    assert math.isclose(report.success_se, statistics.stdev([1.0, 0.0]) / math.sqrt(2))
    assert math.isclose(report.mean_reward_se, statistics.stdev([1.0, 0.25]) / math.sqrt(2))
    lines = report.lines()
    assert "(± 2 SE: 95% interval, clustered by task)" in lines[0]
    assert f"success (reward ≥ 1)  0.500 ± {2 * report.success_se:.3f}" in lines[1]
    assert f"mean reward           0.625 ± {2 * report.mean_reward_se:.3f}" in lines[2]


def test_unequal_samples_per_task_weigh_each_sample_once() -> None:
    # task a: 3 samples of 1.0, task b: 1 sample of 0.0: the mean is 0.75 (not the task means' 0.5), and the
    # cluster-robust error: sqrt(2/1 * ((3 * 0.25)^2 + (-0.75)^2)) / 4
    mean, error = mean_and_error({"a": [1.0, 1.0, 1.0], "b": [0.0]})
    assert mean == 0.75 and math.isclose(error, math.sqrt(2 * (0.75**2 + 0.75**2)) / 4)
    assert math.isnan(mean_and_error({"a": [1.0, 0.0]})[1])  # one task: no error


def test_tokens_latency_and_retries_come_from_the_recorded_calls_and_attempts() -> None:
    trajectories = [trajectory(0, 1.0, latency=100.0), trajectory(1, 1.0, latency=300.0, status=429)]
    report = build_report([rollout(0, attempts=2), rollout(1)], trajectories, [])
    assert (report.prompt_tokens, report.completion_tokens, report.model_calls) == (6, 4, 2)
    assert (report.latency_p50_ms, report.latency_p95_ms) == (100.0, 300.0)
    assert report.retries == 2  # one extra attempt, one call the gateway turned away


def test_gate_violations_count_rollouts_per_rule_and_episode_events_count_tool_errors() -> None:
    events = [
        event(0, "reward_hacking", rule="canary_read", evidence="open ~/.netrc"),
        event(0, "reward_hacking", rule="canary_read", evidence="canary in output"),
        event(1, "reward_hacking", rule="canary_read", evidence="open ~/.netrc"),
        event(1, "reward_hacking", rule="network_attempted", evidence="connect"),
        event(0, "episode", commands=5, command_errors=2),
        event(1, "episode", commands=3, command_errors=1),
    ]
    report = build_report([rollout(0), rollout(1)], [trajectory(0, 0.0), trajectory(1, 0.0)], events)
    assert report.gate_violations == {"canary_read": 2, "network_attempted": 1}
    assert report.tool_errors == 3
    assert "canary_read 2, network_attempted 1" in "\n".join(report.lines())


def test_review_flags_are_counted_apart_from_gate_violations_and_keep_the_reward() -> None:
    events = [
        event(0, "review_flag", rule="runner_reach", evidence="calc.py:3 reads sys.argv"),
        event(0, "review_flag", rule="runner_reach", evidence="calc.py:9 gc.get_objects"),
        event(1, "reward_hacking", rule="runner_tampering", evidence="pytest.py (added)"),
    ]
    report = build_report([rollout(0), rollout(1)], [trajectory(0, 1.0), trajectory(1, 0.0)], events)
    assert report.review_flags == {"runner_reach": 1}
    assert report.gate_violations == {"runner_tampering": 1}
    assert report.mean_reward == 0.5
    assert "review flags   runner_reach 1" in "\n".join(report.lines())


def test_a_paired_difference_is_the_mean_of_per_task_differences_with_their_standard_error() -> None:
    baseline = {"a": [0.0, 0.0], "b": [1.0, 1.0], "c": [0.0, 1.0], "d": [0.0, 0.0], "only-one-side": [1.0]}
    candidate = {"a": [1.0, 1.0], "b": [1.0, 1.0], "c": [1.0, 1.0], "d": [0.0, 1.0]}
    difference, error, tasks = paired_difference(baseline, candidate)
    # per-task differences 1, 0, 0.5, 0.5: mean 0.5, error stdev / sqrt(4) = 0.408 / 2
    assert tasks == 4 and math.isclose(difference, 0.5)
    assert math.isclose(error, statistics.stdev([1.0, 0.0, 0.5, 0.5]) / 2)
    assert verdict(difference, error) == "better"  # 0.5 ± 0.408 (2 SE) leaves zero
    three = {t: baseline[t] for t in "abc"}
    assert verdict(*paired_difference(three, candidate)[:2]) == "within noise"  # 0.5 ± 0.577 on three tasks
    assert verdict(0.75, 0.144) == "better" and verdict(-0.75, 0.144) == "worse"
    assert verdict(-0.75, 0.144, direction=-1) == "better"  # fewer tool errors
    assert verdict(0.75, 0.144, direction=0) == "higher"  # more tokens: a change, neither better nor worse
    assert verdict(0.5, float("nan")) == "too few tasks"
    # an easy task easy for both: pairing removes the spread between tasks that an unpaired error keeps
    easy_and_hard = {"easy": [1.0], "hard": [0.0], "medium": [0.5]}
    better = {t: [s[0] + 0.25] for t, s in easy_and_hard.items()}
    difference, error, _ = paired_difference(easy_and_hard, better)
    assert (difference, error, verdict(difference, error)) == (0.25, 0.0, "better")
    assert mean_and_error(easy_and_hard)[1] > 0.25  # either alone is too noisy to tell


def report_of(per_task: dict[str, dict[str, list[float]]], digests: dict[str, str] | None = None) -> EvalReport:
    return EvalReport.from_dict({"per_task": per_task, "task_digests": digests or dict.fromkeys(per_task, "same"),
                                 **dict.fromkeys(["rollouts", "scored", "tasks", "tool_errors", "prompt_tokens",
                                                  "completion_tokens", "model_calls", "retries", "infra_failures"], 0),
                                 **dict.fromkeys(["success_rate", "success_se", "mean_reward", "mean_reward_se",
                                                  "latency_p50_ms", "latency_p95_ms"], 0.0)})  # fmt: skip


def test_reports_compare_per_metric_paired_by_task_and_refuse_different_tasks() -> None:
    fail = {"success": [0.0], "reward": [0.0], "tool_errors": [2.0], "tokens": [10.0]}
    succeed = {"success": [1.0], "reward": [1.0], "tool_errors": [0.0], "tokens": [10.0]}
    base = report_of({"t000": fail, "t001": fail, "t002": succeed})
    candidate = report_of({"t000": succeed, "t001": succeed, "t002": succeed})
    comparison = compare_reports(base, candidate, ("base", "v2"))
    assert (comparison.tasks, comparison.unpaired) == (3, 0)
    success = comparison.row("success")
    assert (success.baseline, success.candidate, success.verdict) == (1 / 3, 1.0, "within noise")  # 3 tasks
    assert math.isclose(success.difference, 2 / 3) and math.isclose(success.error, statistics.stdev([1, 1, 0]) / 3**0.5)
    assert comparison.row("tokens").verdict == "within noise"  # 0 ± 0
    assert compare_reports(base, base, ("base", "base")).row("reward").verdict == "within noise"
    many = report_of({f"t{i:03d}": fail for i in range(6)})
    all_succeed = report_of({f"t{i:03d}": succeed for i in range(6)})
    assert compare_reports(many, all_succeed, ("a", "b")).row("success").verdict == "better"
    assert compare_reports(many, all_succeed, ("a", "b")).row("tool_errors").verdict == "better"  # fewer
    assert compare_reports(all_succeed, many, ("a", "b")).row("reward").verdict == "worse"
    assert any("better" in line for line in compare_reports(many, all_succeed, ("a", "b")).lines())
    # a report read back from its JSON compares the same
    again = EvalReport.from_dict(json.loads(json.dumps(many.as_dict())))
    same = [json.dumps(compare_reports(r, all_succeed, ("a", "b")).as_dict()) for r in (again, many)]
    assert same[0] == same[1]  # (as JSON: NaN, a metric these reports lack, is never equal to itself)
    other_tasks = report_of({f"t{i:03d}": succeed for i in range(6)}, {f"t{i:03d}": "other" for i in range(6)})
    with pytest.raises(ValueError, match="different tasks"):
        compare_reports(many, other_tasks, ("a", "b"))
    with pytest.raises(ValueError, match="no per-task results"):
        compare_reports(report_of({}), many, ("old", "b"))


def test_a_report_keeps_each_tasks_per_rollout_metrics_named_by_its_index() -> None:
    rollouts = [rollout(i) for i in range(4)]
    for i, r in enumerate(rollouts):
        r.metadata["task_index"] = i // 2  # two samples of each of two tasks
        r.task = {"word": f"w{i // 2}"}
    trajectories = [trajectory(0, 1.0), trajectory(1, 0.0), trajectory(2, 0.5), trajectory(3, None, FailureKind.INFRA)]
    report = build_report(
        rollouts, trajectories, [event(1, "reward_hacking", rule="r"), event(2, "episode", command_errors=3)]
    )
    assert report.per_task["t000"]["success"] == [1.0, 0.0] and report.per_task["t001"]["reward"] == [0.5]
    assert report.per_task["t000"]["gate_violations"] == [0.0, 1.0] and report.per_task["t001"]["tool_errors"] == [3.0]
    assert report.per_task["t000"]["tokens"] == [5.0, 5.0] and report.per_task["t000"]["model_calls"] == [1.0, 1.0]
    assert report.task_digests["t000"] != report.task_digests["t001"]


def test_the_cost_per_success_is_paired_by_task_in_usd_when_both_reports_are_priced_else_in_tokens() -> None:
    def side(successes: list[float], usd: float) -> EvalReport:
        return report_of({f"t{i:03d}": {"success": [s], "tokens": [100.0], "usd": [usd]}
                          for i, s in enumerate(successes)})  # fmt: skip

    half, every = side([1.0, 0.0] * 12, 0.002), side([1.0] * 24, 0.002)
    row = compare_reports(half, every, ("half", "every")).row(COST_PER_SUCCESS)
    # 24 tasks at $0.002: $0.048 over 12 successes, then over 24; in USD per 1000 successes, 4 -> 2
    assert row.label == "USD per 1000 successes" and (row.baseline, row.candidate) == (4.0, 2.0)
    # the delta method, by task: u_t = (c_t - R s_t) / sum s = ±1/6 before, 0 after; error sqrt(24/23 * 24 * 16) / 24
    assert math.isclose(row.error, math.sqrt(24 / 23 * 24 * 16) / 24) and row.verdict == "better"
    assert compare_reports(every, half, ("every", "half")).row(COST_PER_SUCCESS).verdict == "worse"
    few = compare_reports(side([1.0, 0.0] * 2, 0.002), side([1.0] * 4, 0.002), ("a", "b")).row(COST_PER_SUCCESS)
    assert (few.difference, few.verdict) == (-2.0, "within noise")  # the same halving on 4 tasks: ± 4.6
    unpriced = report_of({t: {k: v for k, v in m.items() if k != "usd"} for t, m in half.per_task.items()})
    tokens = compare_reports(unpriced, every, ("unpriced", "every")).row(COST_PER_SUCCESS)
    assert tokens.label == "tokens per success" and (tokens.baseline, tokens.candidate) == (200.0, 100.0)
    none = compare_reports(side([0.0] * 4, 0.002), side([1.0] * 4, 0.002), ("none", "b")).row(COST_PER_SUCCESS)
    assert math.isnan(none.baseline) and none.verdict == "too few tasks"  # no success: no cost per success


def test_a_priced_report_keeps_each_rollouts_cost_in_usd_per_task() -> None:
    rollouts = [rollout(i) for i in range(2)]
    for i, r in enumerate(rollouts):
        r.metadata["task_index"] = i
    trajectories = [trajectory(0, 1.0, latency=2000.0), trajectory(1, 0.0, latency=1000.0)]
    priced = build_report(rollouts, trajectories, [], prices=Prices(device_second=0.5))
    assert priced.per_task["t000"]["usd"] == [1.0] and priced.per_task["t001"]["usd"] == [0.5]  # 2 s, 1 s at 0.5
    assert "usd" not in build_report(rollouts, trajectories, []).per_task["t000"]
