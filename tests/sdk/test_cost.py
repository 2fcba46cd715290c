"""What rollouts cost (alight/cost.py): tokens by direction, model- and sandbox-seconds, money from a price table."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from alight.cost import Prices, cost_summary, rollout_cost
from alight.evaluation import EvalReport, build_report
from alight.schemas import (
    ApiFlavour,
    Attempt,
    AttemptStatus,
    GateFlag,
    Mode,
    ModelCall,
    Rollout,
    RolloutState,
    Trajectory,
    TrajectoryCall,
)

NOW = datetime.now(UTC)
# An external upstream priced per token (USD per million), local inference per device-second, sandbox time.
PRICES = Prices.model_validate(
    {"tokens": {"openai": {"prompt": 2.0, "completion": 10.0}}, "device_second": 0.01, "sandbox_second": 0.001}
)


def rollout(i: int, seconds: float) -> Rollout:
    attempt = Attempt(rollout_id=f"r{i}", attempt=1, status=AttemptStatus.SUCCEEDED, started_at=NOW,
                      ended_at=NOW + timedelta(seconds=seconds))  # fmt: skip
    return Rollout(
        id=f"r{i}", mode=Mode.VAL, group_id=None, runner=None, timeout_s=60, max_attempts=2, metadata={},
        state=RolloutState.SUCCEEDED, policy_version=0, created_at=NOW, updated_at=NOW, seq=i, attempts=[attempt],
    )  # fmt: skip


def call(i: int, upstream: str, prompt: int, completion: int, latency_ms: float, model: str = "policy") -> ModelCall:
    return ModelCall(
        id=f"c{i}-{upstream}", rollout_id=f"r{i}", attempt=1, seq=0, flavour=ApiFlavour.CHAT, request={"model": model},
        status_code=200, prompt_token_ids=list(range(prompt)), response_token_ids=list(range(completion)),
        upstream=upstream, latency_ms=latency_ms, created_at=NOW,
    )  # fmt: skip


def trajectory(i: int, reward: float, calls: list[ModelCall], **fields: Any) -> Trajectory:
    return Trajectory(
        rollout_id=f"r{i}", attempt=1, group_id=None, mode=Mode.VAL, state=RolloutState.SUCCEEDED, attempt_status=None,
        failure_kind=None, calls=[TrajectoryCall(call=c) for c in calls], rewards=[], final_reward=reward, **fields,
    )  # fmt: skip


def test_a_rollout_costs_its_tokens_at_the_upstream_price_and_local_calls_by_the_device_second() -> None:
    calls = [call(0, "openai", 1000, 200, 300.0), call(0, "embedded", 500, 100, 1500.0)]
    cost = rollout_cost(trajectory(0, 1.0, calls), rollout(0, 4.0), PRICES)
    assert (cost.prompt_tokens, cost.completion_tokens) == (1500, 300)
    assert math.isclose(cost.model_seconds, 1.8)
    assert math.isclose(cost.sandbox_seconds, 4.0)
    # 1000 x 2 + 200 x 10 per million for the priced call, 1.5 s x 0.01 for the local one, 4 s x 0.001 sandbox
    assert math.isclose(cost.usd, 4000 / 1e6 + 0.015 + 0.004)


def test_a_model_name_prices_a_call_when_its_upstream_has_no_price() -> None:
    prices = Prices.model_validate({"tokens": {"gpt-x": {"prompt": 1.0, "completion": 1.0}}, "device_second": 5.0})
    cost = rollout_cost(trajectory(0, 0.0, [call(0, "up-1", 10, 10, 1000.0, model="gpt-x")]), None, prices)
    assert math.isclose(cost.usd, 20 / 1e6)  # by token, not 1 s x 5
    assert cost.sandbox_seconds == 0.0  # no rollout: no attempt to time


def test_cost_per_success_is_every_rollout_s_cost_over_the_successes_and_patches_need_clean_gates() -> None:
    flag = GateFlag(kind="reward_hacking", rule="test_file_modified", attempt=1)
    trajectories = [
        trajectory(0, 1.0, [call(0, "openai", 100, 100, 100.0)], gated=True),  # an accepted patch
        trajectory(1, 1.0, [call(1, "openai", 100, 100, 100.0)], gated=True, gate_flags=[flag]),  # not accepted
        trajectory(2, 0.0, [call(2, "openai", 100, 100, 100.0)], gated=True),  # a failure: still paid for
        trajectory(3, 0.5, [call(3, "openai", 100, 100, 100.0)]),
    ]
    rollouts = [rollout(i, 2.0) for i in range(4)]
    summary = cost_summary(rollouts, trajectories, PRICES, 1.0)
    assert (summary.rollouts, summary.successes, summary.coding_rollouts, summary.accepted_patches) == (4, 2, 3, 1)
    each = (100 * 2 + 100 * 10) / 1e6 + 2.0 * 0.001
    assert math.isclose(summary.total.usd, 4 * each)
    metrics = summary.metrics()
    assert metrics["cost/tokens_per_success"] == 800 / 2
    assert math.isclose(metrics["cost/usd_per_success"], 4 * each / 2)
    assert math.isclose(metrics["cost/usd_per_accepted_patch"], 4 * each)
    assert math.isclose(metrics["cost/sandbox_seconds_per_success"], 8.0 / 2)
    unpriced = cost_summary(rollouts, trajectories, None, 1.0).metrics()
    assert "cost/usd" not in unpriced and "cost/usd_per_success" not in unpriced
    assert unpriced["cost/tokens_per_success"] == 400
    nothing = cost_summary(rollouts, trajectories, PRICES, 2.0).metrics()  # no success: no per-success figure
    assert "cost/usd_per_success" not in nothing and nothing["cost/successes"] == 0


def test_the_eval_report_carries_the_cost_and_reads_it_back() -> None:
    trajectories = [trajectory(0, 1.0, [call(0, "openai", 1000, 0, 100.0)]), trajectory(1, 0.0, [])]
    report = build_report([rollout(0, 1.0), rollout(1, 1.0)], trajectories, [], prices=PRICES)
    assert math.isclose(report.cost["per_success"]["usd"], 1000 * 2 / 1e6 + 2 * 0.001)
    assert report.cost["per_success"]["tokens"] == 1000
    again = EvalReport.from_dict(report.as_dict())
    assert any(line.startswith("  per success    1000 tokens") for line in again.lines()), again.lines()


def test_a_price_table_refuses_unknown_keys_and_negative_prices() -> None:
    with pytest.raises(ValidationError, match="extra"):
        Prices.model_validate({"tokens": {"a": {"prompt": 1, "completion": 1, "cached": 1}}})
    with pytest.raises(ValidationError, match="greater than or equal"):
        Prices.model_validate({"device_second": -1})
