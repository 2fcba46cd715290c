"""Asynchronous training with several policies: each group's staleness counted per policy, on a live server.

The test plays the controller (it claims and ends attempts) and the gateway (it records each call with its
`policy:<name>` flag and the global version that served it, in the real store); the trainer's weight updates
are policy versions whose metadata names the policy they changed, as the per-policy weight sync writes them.
"""

from __future__ import annotations

from typing import Any

from alight.client import AlightClient
from alight.schemas import AttemptFinish, RewardCreate
from alight_server.trainer.run.async_pool import oldest_versions_by_policy
from tests.server.trainer.conftest import make_pool
from tests.server.trainer.samples_fixtures import model_call, trajectory

TASKS = [{"word": w} for w in ("apple", "river", "stone", "cloud", "grass", "flame")]


TWO_POLICIES = {
    "lora": {"enabled": True},
    "policies": {"planner": {}, "executor": {}},
    "routing": {"rules": [{"agent": "executor", "policy": "executor"}], "default": "planner"},
}


def end_with_calls(client: AlightClient, live_server: Any, rollout_ids: list[str], served: dict[str, int]) -> None:
    """Claim each attempt, record one call per policy in `served` (policy -> the global version that served it),
    reward it and end it as a success."""
    for start in client.claim_attempts(limit=len(rollout_ids), ids=rollout_ids):
        rid = start.rollout.id
        for seq, (policy, version) in enumerate(served.items()):
            call = model_call(seq, [1, 2], [3], rollout_id=rid, attempt=start.attempt, flags=[f"policy:{policy}"])
            live_server.store.add_model_call(call.model_copy(update={"policy_version": version}))
        client.add_reward(rid, RewardCreate(attempt=start.attempt, value=1.0, final=True))
        client.finish_attempt(rid, start.attempt, AttemptFinish(status="succeeded"))


def update(client: AlightClient, policy: str) -> None:
    """One weight update of `policy` alone (the global version goes up by one)."""
    client.add_policy_version({"policies": [policy]})


def test_each_groups_staleness_is_counted_per_policy(client, live_server, async_config):
    """The planner is updated 3 times, the executor once: a group aged 4 global versions is 3 and 1 stale."""
    pool = make_pool(client, async_config(TWO_POLICIES, max_staleness=10), TASKS)
    pool.top_up(step=0)
    old, recent, _ = pool.groups
    end_with_calls(client, live_server, old.ids, {"planner": 0, "executor": 0})
    update(client, "planner")  # 1
    update(client, "planner")  # 2
    update(client, "executor")  # 3
    end_with_calls(client, live_server, recent.ids, {"planner": 2, "executor": 3})
    update(client, "planner")  # 4

    taken = pool.take(step=0, version=4)
    assert [g.number for g in taken.groups] == [0, 1]
    assert taken.staleness == [3, 1]  # each group's stalest policy, not 4 and 2 global versions
    assert taken.metrics["policy/planner/async/staleness_mean"] == 2.0  # (3 + 1) / 2
    assert taken.metrics["policy/planner/async/staleness_max"] == 3.0
    assert taken.metrics["policy/executor/async/staleness_mean"] == 0.5  # (1 + 0) / 2
    assert taken.metrics["policy/executor/async/staleness_max"] == 1.0


def test_each_policys_rows_get_their_own_stale_weight(client, live_server, async_config):
    pool = make_pool(client, async_config(TWO_POLICIES, max_staleness=1, stale="downweight"), TASKS)
    pool.top_up(step=0)
    old, recent, _ = pool.groups
    end_with_calls(client, live_server, old.ids + recent.ids, {"planner": 0, "executor": 0})
    for _ in range(3):
        update(client, "planner")

    taken = pool.take(step=0, version=3)
    assert taken.policy_weights == {
        "planner": {old.group_id: 1 / 3, recent.group_id: 1 / 3},  # 3 updates, 2 past max_staleness
        "executor": {old.group_id: 1.0, recent.group_id: 1.0},
    }


def test_a_group_aged_only_by_another_policys_updates_is_not_dropped(client, live_server, async_config):
    pool = make_pool(client, async_config(TWO_POLICIES, max_staleness=1, stale="drop"), TASKS)
    pool.top_up(step=0)
    old, recent, _ = pool.groups
    end_with_calls(client, live_server, old.ids + recent.ids, {"executor": 0})
    for _ in range(3):
        update(client, "planner")

    taken = pool.take(step=0, version=3)
    assert [g.number for g in taken.groups] == [0, 1] and taken.staleness == [0, 0]
    assert taken.metrics["async/dropped_stale"] == 0
    assert "policy/planner/async/staleness_mean" not in taken.metrics  # no planner call in any group taken


def test_a_group_too_stale_for_one_policy_is_dropped_whole(client, live_server, async_config):
    pool = make_pool(client, async_config(TWO_POLICIES, max_staleness=1, stale="drop"), TASKS)
    pool.top_up(step=0)
    old, *_ = pool.groups
    end_with_calls(client, live_server, old.ids, {"planner": 0, "executor": 0})
    update(client, "planner")
    update(client, "planner")
    pool.top_up(step=1)
    end_with_calls(client, live_server, [i for g in pool.groups[1:] for i in g.ids], {"planner": 2, "executor": 2})

    taken = pool.take(step=1, version=2)
    assert old not in taken.groups and taken.metrics["async/dropped_stale"] == 1


def test_a_policys_oldest_version_is_its_own_calls_not_the_groups() -> None:
    calls = [
        model_call(0, [1], [2], flags=["policy:planner"], policy_version=5),
        model_call(1, [1], [2], flags=["policy:executor"], policy_version=2),
        model_call(2, [1], [2], flags=["policy:planner"], policy_version=4),
        model_call(3, [1], [2], flags=["policy:planner", "policy:executor"], policy_version=0),  # neither's
        model_call(4, [1], [2], policy_version=0),  # no policy: ages none
    ]
    assert oldest_versions_by_policy([trajectory(calls)], []) == {"planner": 4, "executor": 2}
