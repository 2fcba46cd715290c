"""Samples per policy (policy_samples.py): each policy's calls only, scored by its own reward, then build_samples."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from alight.schemas import FailureKind, ModelCall, Reward, RewardSource, Trajectory, TrajectoryCall
from alight_server.trainer.config.policies import PolicyConfig
from alight_server.trainer.step.filters import drop_reason
from alight_server.trainer.step.policy_samples import named_reward, prefix_breaks_by_policy, split_by_policy
from alight_server.trainer.step.samples import SampleConfig, build_samples
from tests.server.trainer.samples_fixtures import CREATED, model_call, trajectory

TWO = {"planner": PolicyConfig(), "executor": PolicyConfig()}
NAMED = {"planner": PolicyConfig(reward="plan_score"), "executor": PolicyConfig(reward="exec_score")}


def routed(seq: int, policy: str, prompt: list[int], response: list[int], *, rollout_id: str = "r1") -> ModelCall:
    return model_call(seq, prompt, response, rollout_id=rollout_id, flags=[f"policy:{policy}"])


def reward(
    rollout_id: str,
    value: float,
    name: str | None,
    *,
    n: int = 0,
    call: ModelCall | None = None,
    source: RewardSource = RewardSource.AGENT,
) -> Reward:
    return Reward(
        id=f"{rollout_id}-{name}-{n}",
        rollout_id=rollout_id,
        attempt=1,
        value=value,
        name=name,
        model_call_id=call.id if call is not None else None,
        source=source,
        created_at=CREATED + timedelta(seconds=n),
    )


def handoff(
    rollout_id: str = "r1", *, group_id: str = "g1", final: float = 1.0, rewards: Sequence[Reward] = ()
) -> Trajectory:
    """A planner turn, an executor turn, then the planner again in the same growing conversation."""
    calls = [
        routed(0, "planner", [1, 2], [3, 4], rollout_id=rollout_id),
        routed(1, "executor", [1, 2, 3, 4, 5], [6, 7], rollout_id=rollout_id),
        routed(2, "planner", [1, 2, 3, 4, 5, 6, 7, 8], [9], rollout_id=rollout_id),
    ]
    t = trajectory(calls, rollout_id=rollout_id, group_id=group_id, reward=final)
    return t.model_copy(update={"rewards": list(rewards)})


def test_calls_of_two_policies_never_share_a_row() -> None:
    split, _ = split_by_policy([handoff()], TWO)
    planner, _ = build_samples(split["planner"])
    executor, _ = build_samples(split["executor"])
    assert planner.row_calls == [(0, 2)]
    assert executor.row_calls == [(1,)]


def test_a_policy_trains_on_its_own_calls_although_the_gateway_flagged_them() -> None:
    split, _ = split_by_policy([handoff()], TWO)
    _, report = build_samples(split["planner"])
    assert report.calls == 2 and report.calls_used == 2 and not report.dropped_calls


def test_the_input_trajectories_keep_their_flags() -> None:
    original = handoff()
    split_by_policy([original], TWO)
    assert [c.call.flags for c in original.calls] == [["policy:planner"], ["policy:executor"], ["policy:planner"]]


def test_a_rollout_without_the_policys_calls_adds_no_rows_but_counts_in_its_group() -> None:
    only_planner = trajectory([routed(0, "planner", [1], [2], rollout_id="r2")], rollout_id="r2", reward=0.0)
    split, _ = split_by_policy([handoff(final=1.0), only_planner], TWO)
    batch, _ = build_samples(split["executor"])
    assert batch.rollout_ids == ["r1", "r2"] and batch.rollout_reward.tolist() == [1.0, 0.0]
    assert batch.row_rollout.tolist() == [0]  # the one executor row, from r1
    assert batch.rollout_group.tolist() == [0, 0]  # one group: the executor's advantage sees both rewards


def test_each_policy_is_scored_by_its_named_reward() -> None:
    first = handoff("r1", rewards=[reward("r1", 0.9, "plan_score"), reward("r1", 0.1, "exec_score")])
    second = handoff("r2", rewards=[reward("r2", 0.2, "plan_score"), reward("r2", 0.7, "exec_score")])
    split, metrics = split_by_policy([first, second], NAMED)
    assert [t.final_reward for t in split["planner"]] == [0.9, 0.2]
    assert [t.final_reward for t in split["executor"]] == [0.1, 0.7]
    assert metrics["policy/planner/filter/no_named_reward"] == 0.0


def test_a_policy_without_a_named_reward_takes_the_rollouts_final_reward() -> None:
    policies = {"planner": PolicyConfig(reward="plan_score"), "executor": PolicyConfig()}
    split, metrics = split_by_policy([handoff(final=0.5, rewards=[reward("r1", 0.9, "plan_score")])], policies)
    assert split["executor"][0].final_reward == 0.5
    assert "policy/executor/filter/no_named_reward" not in metrics


def test_a_rollout_without_the_named_reward_is_left_out_of_that_policy_and_counted() -> None:
    scored = handoff("r1", rewards=[reward("r1", 0.9, "plan_score"), reward("r1", 0.1, "exec_score")])
    unscored = handoff("r2", rewards=[reward("r2", 0.3, "plan_score")])
    split, metrics = split_by_policy([scored, unscored], NAMED)
    assert [t.rollout_id for t in split["planner"]] == ["r1", "r2"]
    assert [t.rollout_id for t in split["executor"]] == ["r1"]
    assert metrics["policy/executor/filter/no_named_reward"] == 1.0
    assert metrics["policy/planner/filter/no_named_reward"] == 0.0


def test_the_latest_named_reward_counts() -> None:
    t = handoff(rewards=[reward("r1", 0.2, "plan_score", n=1), reward("r1", 0.8, "plan_score", n=2)])
    assert named_reward(t, "plan_score") == 0.8


def test_an_evaluators_named_reward_beats_a_later_one_from_the_agent() -> None:
    t = handoff(
        rewards=[
            reward("r1", 0.1, "plan_score", n=1, source=RewardSource.EVALUATOR),
            reward("r1", 1.0, "plan_score", n=2, source=RewardSource.AGENT),
        ]
    )
    assert named_reward(t, "plan_score") == 0.1


def test_a_reward_named_like_another_policys_scores_only_that_policy() -> None:
    """The agent reports the planner's reward on an executor call: it is no step reward of the executor's rows."""
    t = handoff(final=0.0)
    executor_call = t.calls[1].call
    forged = reward("r1", 5.0, "plan_score", call=executor_call)
    calls = [c if c.call.seq != 1 else TrajectoryCall(call=c.call, rewards=[forged]) for c in t.calls]
    t = t.model_copy(update={"calls": calls, "rewards": [forged, reward("r1", 0.0, "exec_score")]})
    split, _ = split_by_policy([t], NAMED)
    executor, _ = build_samples(split["executor"])
    planner, _ = build_samples(split["planner"])
    assert executor.rollout_reward.tolist() == [0.0] and float(executor.step_returns.abs().sum()) == 0.0
    assert planner.rollout_reward.tolist() == [5.0]


def test_an_unnamed_step_reward_stays_on_its_call() -> None:
    t = handoff()
    step = reward("r1", 0.5, None, call=t.calls[1].call)
    t = t.model_copy(update={"calls": [t.calls[0], TrajectoryCall(call=t.calls[1].call, rewards=[step]), t.calls[2]]})
    split, _ = split_by_policy([t], TWO)
    executor, _ = build_samples(split["executor"])
    assert float(executor.step_returns.max()) == 0.5


def test_a_call_flagged_with_a_policy_not_in_the_config_is_dropped_and_counted() -> None:
    calls = [routed(0, "planner", [1], [2]), routed(1, "intruder", [1, 2, 3], [4]), model_call(2, [1, 2, 3, 4], [5])]
    split, metrics = split_by_policy([trajectory(calls)], TWO)
    assert [[c.call.seq for t in copies for c in t.calls] for copies in split.values()] == [[0], []]
    assert metrics["filter/calls_unknown_policy"] == 1.0
    assert metrics["filter/calls_no_policy"] == 1.0


def test_a_call_flagged_with_two_policies_trains_neither() -> None:
    call = model_call(0, [1], [2], flags=["policy:planner", "policy:executor"])
    split, metrics = split_by_policy([trajectory([call])], TWO)
    assert all(t.calls == [] for copies in split.values() for t in copies)
    assert metrics["filter/calls_several_policies"] == 1.0


def test_an_infra_failure_is_left_to_the_builder_to_count_not_called_unscored() -> None:
    failed = trajectory([routed(0, "planner", [1], [2])], reward=None, failure_kind=FailureKind.INFRA)
    split, metrics = split_by_policy([failed], NAMED)
    assert metrics["policy/planner/filter/no_named_reward"] == 0.0
    _, report = build_samples(split["planner"])
    assert report.dropped_rollouts == {"infra_failure": 1}


def test_the_filter_counts_prefix_breaks_in_each_policys_own_calls() -> None:
    """The planner's second call rewrites its history: one break, although the gateway flagged every call."""
    calls = [
        routed(0, "planner", [1, 2], [3]),
        routed(1, "executor", [1, 2, 3, 5], [6]),
        routed(2, "planner", [7, 8], [9]),
    ]
    t = trajectory(calls)
    assert prefix_breaks_by_policy(t, SampleConfig()) == 1
    assert drop_reason(t, SampleConfig(max_prefix_breaks=0)) == "prefix_breaks"


def test_a_handoff_between_policies_is_no_prefix_break() -> None:
    assert prefix_breaks_by_policy(handoff(), SampleConfig()) == 0
