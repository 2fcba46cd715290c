"""The asynchronous group pool on a live server, the test acting as the controller that ends attempts."""

from __future__ import annotations

from alight.client import AlightClient
from alight.schemas import AttemptFinish, FailureKind, RewardCreate, RolloutState
from alight_server.trainer.run.async_pool import GroupPool
from tests.server.trainer.conftest import make_pool

TASKS = [{"word": w} for w in ("apple", "river", "stone", "cloud", "grass", "flame", "water", "stars")]


def end(client: AlightClient, rollout_ids: list[str], reward: float = 1.0, kind: FailureKind | None = None) -> None:
    """Claim and end attempts as a controller would: rewarded successes, or failures of `kind`."""
    for start in client.claim_attempts(limit=len(rollout_ids), ids=rollout_ids):
        rid = start.rollout.id
        if kind is None:
            client.add_reward(
                rid, RewardCreate(attempt=start.attempt, value=reward + rollout_ids.index(rid), final=True)
            )
            client.finish_attempt(rid, start.attempt, AttemptFinish(status="succeeded"))
        else:
            client.finish_attempt(rid, start.attempt, AttemptFinish(status="failed", failure_kind=kind))


def bump_policy_version(client: AlightClient) -> None:
    client.pause_gateway()
    client.resume_gateway(weights_changed=True)


def test_a_step_takes_the_complete_groups_while_a_slow_group_carries_over(client, async_config):
    pool = make_pool(client, async_config(max_staleness=5), TASKS)
    pool.top_up(step=0)
    slow, *others = pool.groups
    end(client, [i for g in others for i in g.ids])

    first = pool.take(step=0, version=0)
    assert [g.number for g in first.groups] == [1, 2]
    assert first.metrics["async/carry_over_out"] == 1 and pool.groups == [slow]

    bump_policy_version(client)  # the step's weight update: the slow group keeps running across it
    pool.top_up(step=1)
    end(client, slow.ids + pool.groups[1].ids)
    second = pool.take(step=1, version=1)
    assert [g.number for g in second.groups] == [0, 3] and second.staleness == [1, 0]
    assert second.metrics["async/carry_over_in"] == 1 and second.metrics["async/staleness_1"] == 1


def test_a_group_with_an_infra_failure_is_dropped_and_never_trained_in_part(client, async_config):
    pool = make_pool(client, async_config(), TASKS)
    pool.top_up(step=0)
    broken, *whole = pool.groups
    end(client, broken.ids[:1])
    end(client, broken.ids[1:], kind=FailureKind.INFRA)
    end(client, [i for g in whole for i in g.ids])

    taken = pool.take(step=0, version=0)
    assert broken not in taken.groups and taken.metrics["async/dropped_infra"] == 1
    for group in taken.groups:
        assert group.phase is not None
        assert [r.state for r in group.phase.rollouts] == [RolloutState.SUCCEEDED] * 2
        assert len(group.phase.rewards) == 2  # every rollout of a used group is in its statistics


def stale_by_two(client: AlightClient, pool: GroupPool) -> None:
    """Group 0 completes two policy versions after it started; groups 3 and 4 start on the newest version."""
    pool.top_up(step=0)
    end(client, [i for g in pool.groups[1:] for i in g.ids])
    pool.take(step=0, version=0)
    bump_policy_version(client)
    bump_policy_version(client)
    pool.top_up(step=2)
    end(client, [i for g in pool.groups for i in g.ids])


def test_a_group_older_than_max_staleness_is_dropped_and_counted(client, async_config):
    pool = make_pool(client, async_config(max_staleness=1), TASKS)
    stale_by_two(client, pool)
    taken = pool.take(step=2, version=2)
    assert [g.number for g in taken.groups] == [3, 4] and taken.staleness == [0, 0]
    assert taken.metrics["async/dropped_stale"] == 1


def test_a_group_older_than_max_staleness_is_down_weighted_when_asked(client, async_config):
    pool = make_pool(client, async_config(max_staleness=1, stale="downweight"), TASKS)
    stale_by_two(client, pool)
    taken = pool.take(step=2, version=2)
    assert [g.number for g in taken.groups] == [0, 3] and taken.staleness == [2, 0]
    assert taken.weights == {taken.groups[0].group_id: 0.5, taken.groups[1].group_id: 1.0}
    assert taken.metrics["async/dropped_stale"] == 0 and taken.metrics["async/downweighted"] == 1


def test_restoring_a_pool_continues_its_rollouts_instead_of_starting_new_ones(client, async_config, live_server):
    config = async_config()
    pool = make_pool(client, config, TASKS)
    pool.top_up(step=0)
    end(client, pool.groups[0].ids)
    state = pool.state()
    before = {r.id for r in live_server.store.list_rollouts()}

    resumed = make_pool(client, config, TASKS)
    resumed.restore(state)
    assert {r.id for r in live_server.store.list_rollouts()} == before
    assert [g.ids for g in resumed.groups] == [g.ids for g in pool.groups]
    end(client, [i for g in resumed.groups[1:] for i in g.ids])
    taken = resumed.take(step=0, version=0)
    assert [g.number for g in taken.groups] == [0, 1]
