"""The LLM judge as a reward source, on the real server and store, against a scripted judge that speaks the real
OpenAI protocol on loopback: absolute and group scores, weights, the tie-break mode, the cache, retries, failure
as infrastructure (never a zero), the run's budget, and asynchronous groups judged once their last member ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from judge_fixtures import (
    LABELS,
    finished_group,
    judged_blocks,
    make_judging,
    phase_of,
)
from samples_fixtures import model_call

from alight.client import AlightClient
from alight.schemas import JUDGEMENT, AttemptFinish, FailureKind, RewardSource
from alight_server.config import RateLimit
from alight_server.trainer.config.run import ConfigError, parse_config
from alight_server.trainer.run.async_pool import GroupPool
from alight_server.trainer.run.dataset import TaskCursor


def judge_rewards(client: AlightClient, rollout_id: str) -> dict[str | None, float]:
    """The judge's rewards of a rollout: its score under "judge", the combined final reward under None."""
    rewards = client.trajectory(rollout_id).rewards
    return {r.name: r.value for r in rewards if r.source == RewardSource.JUDGE}


def test_absolute_mode_scores_each_rollout_in_its_own_call_and_records_the_judgement(
    client, live_server, scripted_judge
):
    group = finished_group(client, live_server, "g", ["It is 42.", "It is 41."])
    judged = make_judging(client, scripted_judge).judge_phase(phase_of(client, group))

    assert scripted_judge.calls == 2
    assert [t.final_reward for t in judged.trajectories] == pytest.approx([0.9, 0.2])
    assert judge_rewards(client, "g-k0") == pytest.approx({"judge": 0.9, None: 0.9})
    (event,) = client.list_events("g-k0", kind=JUDGEMENT, reveal=True)
    record = event.payload
    assert record["scores"] == {"g-k0": pytest.approx(0.9)} and "SCORE" in record["answer"]
    assert len(record["prompt_sha256"]) == 64 and record["prompt_tokens"] > 0 and record["completion_tokens"] > 0
    assert record["latency_s"] >= 0 and record["tries"] == 1 and record["cached"] is False
    # infrastructure, not policy: the judge's calls are not the agent's model calls
    assert [len(t.calls) for t in judged.trajectories] == [1, 1]


def test_group_mode_ranks_the_whole_group_in_one_call(client, live_server, scripted_judge):
    group = finished_group(client, live_server, "g", ["41", "The answer is 42", "40"])
    judged = make_judging(client, scripted_judge, mode="group").judge_phase(phase_of(client, group))

    assert scripted_judge.calls == 1
    (call,) = scripted_judge.state.calls
    assert len(LABELS.findall(call.request["messages"][0]["content"])) == 3
    assert [t.final_reward for t in judged.trajectories] == pytest.approx([0.2, 0.9, 0.2])
    scores = client.list_events("g-k1", kind=JUDGEMENT)[0].payload["scores"]
    assert scores == pytest.approx({"g-k0": 0.2, "g-k1": 0.9, "g-k2": 0.2})


def test_the_judge_adds_to_the_verifiable_reward_by_its_weight(client, live_server, scripted_judge):
    group = finished_group(client, live_server, "g", ["42", "7"], rewards=[1.0, 0.0])
    judged = make_judging(client, scripted_judge, weight=0.5).judge_phase(phase_of(client, group))

    assert [t.final_reward for t in judged.trajectories] == pytest.approx([1.0 + 0.5 * 0.9, 0.0 + 0.5 * 0.2])
    assert judge_rewards(client, "g-k1") == pytest.approx({"judge": 0.2, None: 0.1})


def test_only_when_tied_judges_only_the_groups_whose_verifiable_rewards_are_all_equal(
    client, live_server, scripted_judge
):
    ranked = finished_group(client, live_server, "ranked", ["42", "7"], rewards=[1.0, 0.0])
    failed = finished_group(client, live_server, "failed", ["42", "7"], rewards=[0.0, 0.0])
    judging = make_judging(client, scripted_judge, only_when_tied=True)
    judged = judging.judge_phase(phase_of(client, ranked, failed))

    assert scripted_judge.calls == 2  # the tied group's two rollouts, nothing of the ranked one
    assert judge_rewards(client, "ranked-k0") == {} and judge_rewards(client, "ranked-k1") == {}
    assert [t.final_reward for t in judged.trajectories] == pytest.approx([1.0, 0.0, 0.9, 0.2])


def test_the_same_rubric_task_and_answer_are_judged_once(client, live_server, scripted_judge):
    judging = make_judging(client, scripted_judge)
    first = finished_group(client, live_server, "a", ["It is 42."])
    again = finished_group(client, live_server, "b", ["It is 42."])
    judging.judge_phase(phase_of(client, first))
    judging.judge_phase(phase_of(client, again))

    assert scripted_judge.calls == 1
    assert client.list_events("b-k0", kind=JUDGEMENT)[0].payload["cached"] is True
    assert judge_rewards(client, "b-k0") == pytest.approx({"judge": 0.9, None: 0.9})


def test_a_429_is_retried_after_the_wait_its_retry_after_asks(client, live_server, scripted_judge):
    scripted_judge.state.faults.fail_times, scripted_judge.state.faults.fail_status = 1, 429
    scripted_judge.state.faults.retry_after_s = 1.5
    waits: list[float] = []
    group = finished_group(client, live_server, "g", ["42"])
    make_judging(client, scripted_judge, waits=waits).judge_phase(phase_of(client, group))

    assert [c.status for c in scripted_judge.state.calls] == [429, 200]
    assert waits == [1.5]
    assert client.list_events("g-k0", kind=JUDGEMENT)[0].payload["tries"] == 2
    assert judge_rewards(client, "g-k0") == pytest.approx({"judge": 0.9, None: 0.9})


def test_a_judge_that_keeps_failing_leaves_its_group_unrewarded_as_an_infrastructure_failure(
    client, live_server, scripted_judge
):
    scripted_judge.state.faults.fail_times, scripted_judge.state.faults.fail_status = 100, 503
    group = finished_group(client, live_server, "g", ["42", "7"])
    waits: list[float] = []
    judged = make_judging(client, scripted_judge, mode="group", waits=waits).judge_phase(phase_of(client, group))

    assert scripted_judge.calls == 3  # the first try and 2 retries
    assert len(waits) == 2, waits  # a wait before each retry, none after the last try
    assert judged.infra == 2 and judged.rewards == [] and judged.missing_reward == 0
    assert all(t.failure_kind == FailureKind.INFRA for t in judged.trajectories)
    for rid in ("g-k0", "g-k1"):  # never a zero: no reward at all, and the event says why
        assert client.trajectory(rid).rewards == [] and client.trajectory(rid).final_reward is None
        assert "503" in client.list_events(rid, kind=JUDGEMENT)[0].payload["failed"]


def test_an_answer_outside_the_strict_format_is_a_failure_not_a_score(client, live_server, scripted_judge):
    scripted_judge.rule[0] = lambda messages: "\nI think it deserves a 9."
    group = finished_group(client, live_server, "g", ["42"])
    judged = make_judging(client, scripted_judge).judge_phase(phase_of(client, group))

    assert judged.infra == 1 and client.trajectory("g-k0").final_reward is None
    assert "no score for" in client.list_events("g-k0", kind=JUDGEMENT)[0].payload["failed"]


def test_judge_calls_count_against_the_runs_rate_budget(client, live_server, scripted_judge):
    judging = make_judging(client, scripted_judge, budget=RateLimit(requests_per_minute=1))
    first = finished_group(client, live_server, "a", ["42"])
    second = finished_group(client, live_server, "b", ["7"])
    assert judging.judge_phase(phase_of(client, first)).infra == 0
    refused = judging.judge_phase(phase_of(client, second))

    assert scripted_judge.calls == 1  # the second judgement would wait ~60 s for the budget: refused, not sent
    assert refused.infra == 1 and client.trajectory("b-k0").final_reward is None
    assert "limits.run requests per minute" in client.list_events("b-k0", kind=JUDGEMENT)[0].payload["failed"]


def test_an_async_group_is_judged_once_its_last_member_ends_and_is_usable_only_then(
    client, live_server, scripted_judge, tmp_path: Path
):
    config = parse_config(
        {"model": "tiny", "dataset": {"train": str(tmp_path / "unused.jsonl")}, "agent": {"command": ["true"]},
         "group_size": 2, "tasks_per_step": 1, "max_attempts": 1,
         "async_rollout": {"enabled": True, "active_groups": 2}},
        tmp_path,
    )  # fmt: skip
    judging = make_judging(client, scripted_judge)
    pool = GroupPool(client, config, "run", TaskCursor([{"q": 1}, {"q": 2}], 0), {}, poll_s=0.05, judging=judging)
    pool.top_up(step=0)
    group = pool.groups[0]
    end_with(client, live_server, group.ids[:1], "42")
    pool._poll()
    assert scripted_judge.calls == 0 and group.judging is None  # a member still runs: nothing judged yet

    end_with(client, live_server, group.ids[1:], "7")
    taken = pool.take(step=0, version=0)
    assert [g.group_id for g in taken.groups] == [group.group_id] and scripted_judge.calls == 2
    phase = taken.groups[0].phase
    assert phase is not None and [t.final_reward for t in phase.trajectories] == pytest.approx([0.9, 0.2])
    assert taken.staleness == [0]  # staleness counted as without a judge


def end_with(client: AlightClient, live_server: Any, rollout_ids: list[str], answer: str) -> None:
    """Claim and end attempts as a controller would, each having answered `answer` in one model call."""
    for start in client.claim_attempts(limit=len(rollout_ids), ids=rollout_ids):
        rid = start.rollout.id
        live_server.store.add_model_call(model_call(0, [1, 2], [3, 4], rollout_id=rid, reply=answer))
        client.finish_attempt(rid, start.attempt, AttemptFinish(status="succeeded"))


@pytest.mark.parametrize(
    ("judge", "problem"),
    [
        ({"rubric": "r"}, "exactly one of model"),
        ({"rubric": "r", "url": "http://x/v1"}, "judge.url needs judge.key_file"),
        ({"rubric": "r", "upstream": "u", "url": "http://x/v1", "key_file": "k"}, "exactly one of model"),
        ({"rubric": "r", "model": "grader"}, "must name a policy of this run with trainable: false"),
        ({"rubric": "r", "upstream": "u", "mode": "pairwise"}, "judge.mode"),
        ({"rubric": "r", "upstream": "u", "weight": 0}, "judge.weight"),
        ({"rubric": "r", "upstream": "u", "scoring": "json"}, "judge.scoring"),
        ({"rubric": "r", "upstream": "u", "scoring": "logprobs", "min_digit_mass": 1.5}, "judge.min_digit_mass"),
    ],
)
def test_a_bad_judge_section_is_refused_with_what_to_fix(tmp_path: Path, judge: dict[str, Any], problem: str):
    raw = {"model": "tiny", "dataset": {"train": "t.jsonl"}, "agent": {"command": ["true"]}, "judge": judge}
    with pytest.raises(ConfigError, match=problem):
        parse_config(raw, tmp_path)


def test_a_rubric_naming_a_file_is_read_from_the_configs_folder(tmp_path: Path):
    (tmp_path / "rubric.md").write_text("Correct and short.\n")
    raw = {"model": "tiny", "dataset": {"train": "t.jsonl"}, "agent": {"command": ["true"]},
           "judge": {"upstream": "u", "rubric": "rubric.md"}}  # fmt: skip
    config = parse_config(raw, tmp_path)
    assert config.judge is not None and config.judge.rubric == "Correct and short.\n"


def test_the_judge_reads_the_task_and_answer_only_as_data_blocks(client, live_server, scripted_judge):
    group = finished_group(client, live_server, "g", ["It is 42."], task={"question": "6 x 7?"})
    make_judging(client, scripted_judge).judge_phase(phase_of(client, group))
    blocks = judged_blocks(scripted_judge.state.calls[0].request["messages"])
    assert blocks.pop("TASK") == '{"question": "6 x 7?"}'
    assert list(blocks.values()) == ["[turn 1]\nIt is 42."]


def test_the_dashboard_shows_the_judgement_beside_the_rollout_not_among_its_calls(client, live_server, scripted_judge):
    group = finished_group(client, live_server, "g", ["It is 42."])
    make_judging(client, scripted_judge).judge_phase(phase_of(client, group))
    with httpx.Client(base_url=live_server.url, headers=live_server.admin_headers()) as api:
        view = api.get("/api/ui/rollouts/g-k0/view", params={"reveal": "true"}).json()

    (judgement,) = view["judgements"]
    assert judgement["scores"] == {"g-k0": pytest.approx(0.9)} and judgement["model"] == "judge"
    assert len(view["trajectory"]["calls"]) == 1  # the agent's one call; the judge's is not there
    assert {r["source"] for r in view["trajectory"]["rewards"]} == {"judge"}


@pytest.mark.timeout(60)
def test_async_groups_ending_together_are_judged_even_with_one_judge_worker(
    client, live_server, scripted_judge, tmp_path: Path
):
    config = parse_config(
        {"model": "tiny", "dataset": {"train": str(tmp_path / "unused.jsonl")}, "agent": {"command": ["true"]},
         "group_size": 2, "tasks_per_step": 2, "max_attempts": 1,
         "async_rollout": {"enabled": True, "active_groups": 3}},
        tmp_path,
    )  # fmt: skip
    judging = make_judging(client, scripted_judge, concurrency=1)
    tasks = [{"q": n} for n in range(3)]
    pool = GroupPool(client, config, "run", TaskCursor(tasks, 0), {}, poll_s=0.05, judging=judging)
    pool.top_up(step=0)
    end_with(client, live_server, [i for g in pool.groups for i in g.ids], "42")
    taken = pool.take(step=0, version=0)
    assert len(taken.groups) == 2
    assert all(t.final_reward == pytest.approx(0.9) for g in taken.groups if g.phase for t in g.phase.trajectories)
