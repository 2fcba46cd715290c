"""Flagged work never trains unreviewed: a step's queued rollouts held, dropped or kept (`review.flags`), decided
ones released into a later step with their recorded versions, rejected ones recorded as regressions, and the
random audit. The real server and store; the trainer's Quarantine screening steps by hand."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from samples_fixtures import model_call

from alight.client import AlightClient
from alight.evaluation import EPISODE
from alight.schemas import (
    REVIEW_DECISION,
    REVIEW_FLAG,
    REVIEW_REQUESTED,
    REWARD_HACKING,
    AttemptFinish,
    EventCreate,
    Mode,
    RewardCreate,
    Rollout,
    RolloutCreate,
)
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.report.display import RunDisplay
from alight_server.trainer.run import train_step as train_step_module
from alight_server.trainer.run.dataset import TaskCursor, TaskSplits
from alight_server.trainer.run.phases import RunPhases
from alight_server.trainer.run.quarantine import Quarantine, regression_tasks
from alight_server.trainer.run.rollout_source import StepRollouts
from alight_server.trainer.run.rollouts import RolloutPhase, collect
from alight_server.trainer.run.train_step import Started, train_step
from alight_server.trainer.step.integrity import audited


@pytest.fixture
def quarantine(
    client: AlightClient, tiny_config: Callable[..., TrainConfig], tmp_path: Path
) -> Callable[..., Quarantine]:
    def make(**review: Any) -> Quarantine:
        config = tiny_config(review={"audit_share": 0.0, **review})
        return Quarantine(client, config, tmp_path)

    return make


def group(
    client: AlightClient, live_server: Any, name: str, *, version: int = 0, events: dict[int, str] | None = None
) -> list[Rollout]:
    """Two finished rollouts of one group (rewards 1 and 0), each with one call served by `version`; `events`:
    rollout index -> the gate event kind it gets."""
    created = client.create_rollouts(
        [RolloutCreate(task={"name": name, "i": i}, mode=Mode.TRAIN, group_id=name) for i in range(2)]
    )
    ids = [r.id for r in created]
    for start in client.claim_attempts(limit=2, ids=ids):
        rid = start.rollout.id
        live_server.store.add_model_call(model_call(0, [1, 2], [3, 4], rollout_id=rid, policy_version=version))
        client.add_reward(rid, RewardCreate(attempt=start.attempt, value=float(rid == ids[0]), final=True))
        client.finish_attempt(rid, start.attempt, AttemptFinish(status="succeeded"))
    for index, kind in (events or {}).items():
        payload = {"command_errors": 0} if kind == EPISODE else {"rule": "runner_reach", "evidence": "a frame"}
        live_server.store.add_event(ids[index], EventCreate(kind=kind, attempt=1, payload=payload))
    return [client.get_rollout(rid) for rid in ids]


def phase(client: AlightClient, *groups: list[Rollout]) -> RolloutPhase:
    return collect(client, [r for g in groups for r in g], time.monotonic())


def decide(live_server: Any, rollout_id: str, decision: str) -> None:
    payload = {"decision": decision, "reviewer": "ana", "note": ""}
    live_server.store.add_event(rollout_id, EventCreate(kind=REVIEW_DECISION, payload=payload))


def ids(screened: Any) -> list[str]:
    return sorted(t.rollout_id for t in screened.trajectories)


def test_a_pending_rollout_holds_its_group_out_until_accepted_then_it_trains_with_its_recorded_version(
    client, live_server, quarantine
):
    q = quarantine()
    flagged = group(client, live_server, "a", version=0, events={0: REVIEW_FLAG})
    clean = group(client, live_server, "b", version=0)
    first = q.screen(phase(client, flagged, clean), step=0, version=0)
    assert ids(first) == sorted(r.id for r in clean)  # the flagged rollout's whole group waits
    assert first.metrics["integrity/quarantined"] == 1.0 and first.metrics["integrity/flag_share"] == 0.25
    empty = RolloutPhase(rollouts=[], trajectories=[], seconds=0.0)
    assert ids(q.screen(empty, step=1, version=1)) == []  # nobody decided yet: still out
    decide(live_server, flagged[0].id, "accept")
    later = q.screen(empty, step=2, version=1)
    assert ids(later) == sorted(r.id for r in flagged)
    assert {c.call.policy_version for t in later.trajectories for c in t.calls} == {0}  # as it was served
    assert later.metrics["integrity/released"] == 2.0 and later.metrics["integrity/quarantined"] == 0.0
    assert {r.id for r in later.rollouts} == {r.id for r in flagged}


def test_an_accepted_group_past_the_staleness_bound_is_dropped_and_counted(client, live_server, quarantine):
    q = quarantine(max_staleness=1)
    flagged = group(client, live_server, "a", version=0, events={1: REVIEW_FLAG})
    assert ids(q.screen(phase(client, flagged), step=0, version=0)) == []
    decide(live_server, flagged[1].id, "accept")
    later = q.screen(RolloutPhase(rollouts=[], trajectories=[], seconds=0.0), step=2, version=2)
    assert ids(later) == []
    assert later.metrics["integrity/dropped_stale"] == 2.0 and later.metrics["integrity/held_groups"] == 0.0


def test_a_rejected_rollout_never_trains_and_its_task_joins_the_regression_tasks(
    client, live_server, quarantine, tmp_path
):
    q = quarantine()
    flagged = group(client, live_server, "a", events={0: REVIEW_FLAG})
    q.screen(phase(client, flagged), step=0, version=0)
    decide(live_server, flagged[0].id, "reject")
    later = q.screen(RolloutPhase(rollouts=[], trajectories=[], seconds=0.0), step=1, version=0)
    assert ids(later) == [flagged[1].id]  # the rest of its group trains
    assert later.metrics["integrity/rejected"] == 1.0
    assert regression_tasks(tmp_path) == [{"name": "a", "i": 0}]
    assert json.loads((tmp_path / "regressions.jsonl").read_text())["reason"] == "flag"


def test_drop_leaves_queued_rollouts_out_for_good_and_train_keeps_them(client, live_server, quarantine):
    flagged = group(client, live_server, "a", events={0: REVIEW_FLAG, 1: REWARD_HACKING})
    dropped = quarantine(flags="drop").screen(phase(client, flagged), step=0, version=0)
    # the hard gate's rollout is the filter's to leave out (filter/gate_flagged); the queued one is gone here
    assert ids(dropped) == [flagged[1].id] and dropped.metrics["integrity/review_dropped"] == 1.0
    assert dropped.metrics["integrity/violation_share"] == 0.5
    kept = quarantine(flags="train").screen(phase(client, flagged), step=0, version=0)
    assert ids(kept) == sorted(r.id for r in flagged) and kept.metrics["integrity/quarantined"] == 0.0


def test_the_audit_queues_what_passed_every_gate_once_and_reports_what_people_rejected(client, live_server, quarantine):
    clean = [group(client, live_server, name, events={0: EPISODE, 1: EPISODE}) for name in ("a", "b")]
    screened = quarantine(audit_share=1.0).screen(phase(client, *clean), step=0, version=0)
    assert ids(screened) == [] and screened.metrics["integrity/audited"] == 4.0
    resumed = quarantine(audit_share=1.0)  # a resumed run screening the same rollouts writes nothing new
    resumed.screen(phase(client, *clean), step=0, version=0)
    requests = [client.list_events(r.id, kind=REVIEW_REQUESTED) for g in clean for r in g]
    assert [len(found) for found in requests] == [1, 1, 1, 1]
    assert requests[0][0].payload == {"reason": "audit"}
    for rollout, decision in zip(clean[0] + clean[1], ["accept", "reject", "accept", "accept"], strict=True):
        decide(live_server, rollout.id, decision)
    later = resumed.screen(RolloutPhase(rollouts=[], trajectories=[], seconds=0.0), step=1, version=0)
    assert later.metrics["integrity/audit_rejected"] == 0.25 and later.metrics["integrity/audits_decided"] == 4.0
    assert ids(later) == sorted([clean[0][0].id, *(r.id for r in clean[1])])


def test_the_audit_never_holds_a_rollout_no_gate_looked_at(client, live_server, quarantine):
    """A run without a grader (the quickstart) passed no gate: nothing of it waits for a review nobody gives."""
    ungraded = group(client, live_server, "plain")
    screened = quarantine(audit_share=1.0).screen(phase(client, ungraded), step=0, version=0)
    assert ids(screened) == sorted(r.id for r in ungraded) and screened.metrics["integrity/audited"] == 0.0
    assert [client.list_events(r.id, kind=REVIEW_REQUESTED) for r in ungraded] == [[], []]


def test_the_audit_draw_is_a_function_of_the_rollout_and_the_seed_at_the_configured_share() -> None:
    rollout_ids = [f"run-s{i // 8:05d}-{i % 8}" for i in range(20_000)]
    drawn = [i for i in rollout_ids if audited(i, seed=7, share=0.02)]
    assert drawn == [i for i in rollout_ids if audited(i, seed=7, share=0.02)]  # a resume draws the same
    # binomial: 400 expected, sd 19.8; 4 sd either side
    assert 320 < len(drawn) < 480
    assert drawn != [i for i in rollout_ids if audited(i, seed=8, share=0.02)]
    assert not any(audited(i, seed=7, share=0.0) for i in rollout_ids[:1000])


def test_a_resumed_run_keeps_holding_the_group_a_checkpoint_held(client, live_server, quarantine):
    flagged = group(client, live_server, "a", events={0: REVIEW_FLAG})
    before = quarantine()
    before.screen(phase(client, flagged), step=0, version=0)
    resumed = quarantine()
    resumed.restore(json.loads(json.dumps(before.state())))  # as the checkpoint stores it
    empty = RolloutPhase(rollouts=[], trajectories=[], seconds=0.0)
    assert ids(resumed.screen(empty, step=1, version=0)) == []
    decide(live_server, flagged[0].id, "accept")
    assert ids(resumed.screen(empty, step=2, version=0)) == sorted(r.id for r in flagged)


def test_validation_runs_the_regression_tasks_again_scored_apart(client, live_server, tiny_config, tmp_path):
    config = tiny_config()
    (tmp_path / "regressions.jsonl").write_text(
        "".join(
            json.dumps({"rollout_id": f"x{i}", "reason": "flag", "step": 0, "task": {"i": i}}) + "\n" for i in range(2)
        )
    )
    phases = RunPhases(client, config, "run1", tmp_path, TaskSplits(train=[{"i": 9}], val=[]), TaskCursor([], 0))
    started = phases.start_regressions(step=3)
    assert started is not None
    for start in client.claim_attempts(limit=2, ids=started.ids):
        rid = start.rollout.id
        client.add_reward(rid, RewardCreate(attempt=start.attempt, value=float(rid == started.ids[0]), final=True))
        client.finish_attempt(rid, start.attempt, AttemptFinish(status="succeeded"))
    live_server.store.add_event(started.ids[1], EventCreate(kind=REWARD_HACKING, payload={"rule": "r", "evidence": ""}))
    metrics = phases.validate(RunDisplay(1, enabled=False), step=3)
    assert [client.get_rollout(i).task for i in started.ids] == [{"i": 0}, {"i": 1}]
    assert {client.get_rollout(i).mode for i in started.ids} == {Mode.VAL}  # never trained on
    assert metrics["regressions/tasks"] == 2.0 and metrics["regressions/score"] == 0.5
    assert metrics["regressions/violation_share"] == 0.5 and "val/score" not in metrics


def test_a_training_step_trains_the_group_a_person_accepted_at_a_later_step(
    client, live_server, quarantine, tiny_config, monkeypatch
):
    """The real train_step with the real quarantine; only the policies' update is a recorder."""
    trained: list[list[str]] = []

    def recording_update(backend: Any, trajectories: list[Any], *args: Any, **kwargs: Any) -> tuple[dict, None]:
        trained.append(sorted(t.rollout_id for t in trajectories))
        return {}, None

    monkeypatch.setattr(train_step_module, "step_policies", recording_update)
    flagged = group(client, live_server, "a", events={0: REVIEW_FLAG})
    clean = group(client, live_server, "b")
    phases = iter([phase(client, flagged, clean), RolloutPhase(rollouts=[], trajectories=[], seconds=0.0)])

    class Source:
        runs_during_training = False

        def take(self, step: int, version: int, display: RunDisplay) -> StepRollouts:
            return StepRollouts(next(phases))

    edge: Any = None  # the parts train_step hands on to the update only
    tokenizer = SimpleNamespace(pad_token_id=0, decode=str)
    live = Started(edge, edge, Source(), edge, tokenizer, edge, edge, quarantine())  # type: ignore[arg-type]
    display = RunDisplay(2, enabled=False)
    first, _ = train_step(live, tiny_config(), 0, 0, display)
    decide(live_server, flagged[0].id, "accept")
    second, _ = train_step(live, tiny_config(), 1, 0, display)
    assert trained == [sorted(r.id for r in clean), sorted(r.id for r in flagged)]
    assert first["integrity/quarantined"] == 1.0 and second["integrity/released"] == 2.0
