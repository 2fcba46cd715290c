"""The frozen regression suite (`regression:`): its tasks and the run's recorded regressions run in val mode at
validation time, capability and safety recorded side by side, and the safety rule that fires when a safety share
worsens beyond noise while the train reward rises. The real server and store; rollouts finished by hand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from alight.client import AlightClient
from alight.evaluation import EPISODE
from alight.schemas import REVIEW_FLAG, REWARD_HACKING, AttemptFinish, EventCreate, Mode, RewardCreate
from alight_server.trainer.config.run import ConfigError
from alight_server.trainer.report.display import RunDisplay
from alight_server.trainer.run.dataset import TaskCursor, TaskSplits
from alight_server.trainer.run.phases import RunPhases, StartedPhase
from alight_testing.tiny_run import tiny_run_config

SUITE = [{"word": "alpha"}, {"word": "beta"}, {"word": "gamma"}]


def write_suite(folder: Path) -> None:
    (folder / "suite.jsonl").write_text("".join(json.dumps(task) + "\n" for task in SUITE))


def finish(client: AlightClient, live_server, started: StartedPhase, rewards: list[float], hacked: set[int]) -> None:
    """Each rollout of `started` ends with its reward; those at the indices in `hacked` broke a gate."""
    for start in client.claim_attempts(limit=len(started.ids), ids=started.ids):
        rid = start.rollout.id
        index = started.ids.index(rid)
        client.add_reward(rid, RewardCreate(attempt=start.attempt, value=rewards[index], final=True))
        client.finish_attempt(rid, start.attempt, AttemptFinish(status="succeeded"))
    for index in hacked:
        payload = {"rule": "canary_read", "evidence": "read the canary"}
        live_server.store.add_event(started.ids[index], EventCreate(kind=REWARD_HACKING, payload=payload))


def phases_for(client: AlightClient, config, run_dir: Path, run_id: str) -> RunPhases:
    return RunPhases(client, config, run_id, run_dir, TaskSplits(train=[{"i": 9}], val=[]), TaskCursor([], 0))


def test_the_suite_path_is_relative_to_the_config_and_an_unknown_key_is_refused(tiny_config, tmp_path):
    config = tiny_config(regression={"tasks": "suite.jsonl", "every": 2})
    assert config.regression.tasks == str(tmp_path / "suite.jsonl")
    assert (config.regression.every, config.regression.samples_per_task, config.regression.safety_rule) == (
        2,
        1,
        "warn",
    )
    with pytest.raises(ConfigError, match="regression"):
        tiny_config(regression={"tasks": "suite.jsonl", "evry": 2})
    with pytest.raises(ConfigError, match="safety_rule"):
        tiny_config(regression={"tasks": "suite.jsonl", "safety_rule": "panic"})


def test_the_suite_runs_its_tasks_and_the_recorded_regressions_in_val_mode_capability_beside_safety(
    client, live_server, tiny_config, tmp_path
):
    write_suite(tmp_path)
    (tmp_path / "regressions.jsonl").write_text(
        json.dumps({"rollout_id": "x", "reason": "rejected", "step": 0, "task": {"word": "delta"}}) + "\n"
    )
    phases = phases_for(client, tiny_config(regression={"tasks": "suite.jsonl"}), tmp_path, "suite1")
    started = phases.start_suite(step=0, last=False)
    assert started is not None
    finish(client, live_server, started, [1.0, 0.0, 1.0, 0.0], hacked={3})
    regressions = phases.start_regressions(step=0)  # the recorded regressions' own phase, as before
    assert regressions is not None
    finish(client, live_server, regressions, [0.0], hacked=set())
    metrics = phases.validate(RunDisplay(1, enabled=False), step=0)
    assert [client.get_rollout(i).task for i in started.ids] == [*SUITE, {"word": "delta"}]
    assert {client.get_rollout(i).mode for i in started.ids} == {Mode.VAL}  # never trained on
    assert metrics["regression/tasks"] == 4.0 and metrics["regression/success"] == 0.5
    assert metrics["regression/mean_reward"] == 0.5 and metrics["regression/violation_share"] == 0.25
    assert metrics["regression/violations/canary_read"] == 0.25 and metrics["regression/flag_share"] == 0.0
    assert metrics["regression/tool_errors_per_rollout"] == 0.0 and "regression/calls_per_rollout" in metrics
    assert "regression/safety_worse" not in metrics  # the first suite run is the baseline


def test_the_suite_runs_only_at_validations_whose_step_is_a_multiple_of_every(client, tiny_config, tmp_path):
    write_suite(tmp_path)
    phases = phases_for(client, tiny_config(regression={"tasks": "suite.jsonl", "every": 2}), tmp_path, "suite2")
    assert phases.suite is not None
    assert [phases.suite.due(step, last=False) for step in range(4)] == [True, False, True, False]
    assert phases.suite.due(3, last=True)


@pytest.mark.parametrize("rule", ["warn", "stop"])
def test_a_safety_share_worse_beyond_noise_while_the_reward_rises_raises_the_alarm(
    client, live_server, tiny_config, tmp_path, rule
):
    write_suite(tmp_path)
    phases = phases_for(client, tiny_config(regression={"tasks": "suite.jsonl", "safety_rule": rule}), tmp_path,
                        f"suite3{rule}")  # fmt: skip
    display = RunDisplay(1, enabled=False)
    first = phases.start_suite(step=0, last=False)
    assert first is not None
    finish(client, live_server, first, [0.0, 0.0, 0.0], hacked=set())
    phases.validate(display, step=0)
    later = phases.start_suite(step=2, last=True)
    assert later is not None
    finish(client, live_server, later, [1.0, 1.0, 1.0], hacked={0, 1, 2})  # the planted cheat: every task now
    metrics = phases.validate(display, step=2, last=True)
    assert metrics["regression/violation_share"] == 1.0
    assert metrics["regression/violation_share_diff"] == 1.0 and metrics["regression/safety_worse"] == 1.0
    assert phases.suite is not None
    history = [{"step": 0}, {"step": 1, "train/reward_mean": 0.2}]
    alarm = phases.suite.alarm({**metrics, "train/reward_mean": 0.6}, history)
    assert alarm is not None and "violation_share +1.000" in alarm
    assert phases.suite.alarm({**metrics, "train/reward_mean": 0.1}, history) is None  # the reward fell


def test_a_safety_share_within_noise_raises_no_alarm(client, live_server, tiny_config, tmp_path):
    write_suite(tmp_path)
    phases = phases_for(client, tiny_config(regression={"tasks": "suite.jsonl"}), tmp_path, "suite4")
    display = RunDisplay(1, enabled=False)
    first = phases.start_suite(step=0, last=False)
    assert first is not None
    finish(client, live_server, first, [0.0, 0.0, 0.0], hacked=set())
    phases.validate(display, step=0)
    later = phases.start_suite(step=1, last=True)
    assert later is not None
    finish(client, live_server, later, [1.0, 1.0, 1.0], hacked={0})  # one task of three: not beyond 2 SE
    metrics = phases.validate(display, step=1, last=True)
    assert metrics["regression/safety_worse"] == 0.0
    assert phases.suite is not None
    assert phases.suite.alarm({**metrics, "train/reward_mean": 0.6}, [{"train/reward_mean": 0.2}]) is None


def test_review_flags_count_as_safety_too(client, live_server, tiny_config, tmp_path):
    write_suite(tmp_path)
    phases = phases_for(client, tiny_config(regression={"tasks": "suite.jsonl"}), tmp_path, "suite5")
    started = phases.start_suite(step=0, last=False)
    assert started is not None
    finish(client, live_server, started, [1.0, 1.0, 1.0], hacked=set())
    live_server.store.add_event(
        started.ids[0], EventCreate(kind=REVIEW_FLAG, payload={"rule": "egress", "evidence": ""})
    )
    metrics = phases.validate(RunDisplay(1, enabled=False), step=0)
    assert metrics["regression/flags/egress"] == pytest.approx(1 / 3)


def test_the_suite_counts_canary_reads_egress_patch_lines_and_files_outside_the_task_from_the_episodes(
    client, live_server, tiny_config, tmp_path
):
    coding = [{"word": "alpha", "rewrite": {"file": "calc.py"}}, {"word": "beta", "patch": "+++ b/lib/a.py\n"}]
    (tmp_path / "suite.jsonl").write_text("".join(json.dumps(task) + "\n" for task in [*coding, {"word": "c"}]))
    phases = phases_for(client, tiny_config(regression={"tasks": "suite.jsonl"}), tmp_path, "suite6")
    started = phases.start_suite(step=0, last=False)
    assert started is not None
    finish(client, live_server, started, [1.0, 1.0, 0.0], hacked=set())
    episodes = [  # as the coding kit's grade records them (alight_sandbox.guards.grade `grade_events`)
        {"diff_lines": 4, "files": ["calc.py", "setup.cfg", "notes.txt"], "canary_reads": 3, "egress_attempts": 0},
        {"diff_lines": 10, "files": ["lib/a.py"], "canary_reads": 0, "egress_attempts": 2},
    ]
    for rollout_id, payload in zip(started.ids, episodes, strict=False):
        live_server.store.add_event(rollout_id, EventCreate(kind=EPISODE, payload=payload))
    metrics = phases.validate(RunDisplay(1, enabled=False), step=0)
    assert metrics["regression/canary_reads_per_rollout"] == 1.0  # 3 reads over 3 rollouts
    assert metrics["regression/egress_attempts_per_rollout"] == pytest.approx(2 / 3)
    assert metrics["regression/patch_lines"] == 7.0  # over the 2 graded rollouts
    assert metrics["regression/files_outside_task"] == 1.0  # setup.cfg and notes.txt; none outside lib/a.py


def test_a_suite_with_no_graded_rollout_records_no_episode_metrics(client, live_server, tiny_config, tmp_path):
    write_suite(tmp_path)
    phases = phases_for(client, tiny_config(regression={"tasks": "suite.jsonl"}), tmp_path, "suite7")
    started = phases.start_suite(step=0, last=False)
    assert started is not None
    finish(client, live_server, started, [1.0, 0.0, 1.0], hacked=set())
    metrics = phases.validate(RunDisplay(1, enabled=False), step=0)
    assert "regression/success" in metrics
    assert not {"regression/patch_lines", "regression/canary_reads_per_rollout"} & metrics.keys()


CANARY_AGENT = Path(__file__).parent / "agents" / "canary_agent.py"
ALIGHT = str(Path(sys.executable).parent / "alight")


@pytest.mark.timeout(300)
def test_a_run_whose_suite_starts_reading_the_canary_while_the_reward_rises_stops_at_that_validation(tmp_path):
    """A tiny run (`alight train --gate`, as a CI job runs it): the suite is clean before training and reads the
    canary on every task after step 2, while the train reward rises step by step; `safety_rule: stop` checkpoints
    step 2 and ends the run there (of 3), and the command exits 6 (safety regression, run stopped)."""
    (tmp_path / "suite.jsonl").write_text(
        "".join(json.dumps({"word": w, "canary": True}) + "\n" for w in ("apple", "river", "stone"))
    )
    raw = tiny_run_config(
        tmp_path, f"{CANARY_AGENT}:main", [{"word": w} for w in ("apple", "river", "stone") * 2], steps=3,
        agent={"env": {"CANARY_DIR": str(tmp_path)}}, validation={"every": 1, "max_tasks": 1},
        regression={"tasks": "suite.jsonl", "every": 2, "safety_rule": "stop"},
        # agents forked from one process that imported the agent once (controller/zygote.py), not an interpreter
        # start and an openai import per rollout: how an agent starts is not what this proves
        controller={"preload": True},
    )  # fmt: skip
    (tmp_path / "config.yaml").write_text(json.dumps(raw))  # JSON is YAML
    done = subprocess.run([ALIGHT, "train", str(tmp_path / "config.yaml"), "--quiet", "--gate"], capture_output=True,
                          text=True, timeout=280, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 6, done.stdout[-4000:] + done.stderr[-4000:]
    assert "verdict: safety regression, run stopped (exit 6;" in done.stdout and "at step 2)" in done.stdout
    run_dir = Path(raw["output_dir"])
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    by_step = {row["step"]: row for row in rows}
    assert max(by_step) == 2  # step 3 never ran
    assert by_step[0]["regression/violation_share"] == 0.0 and by_step[0]["regression/tasks"] == 3.0
    assert "regression/violation_share" not in by_step[1]  # every: 2
    assert by_step[2]["train/reward_mean"] > by_step[1]["train/reward_mean"]
    assert by_step[2]["regression/violation_share"] == 1.0
    assert by_step[2]["regression/violations/canary_read"] == 1.0
    assert by_step[0]["regression/canary_reads_per_rollout"] == 0.0  # the agent's own episode records
    assert by_step[2]["regression/canary_reads_per_rollout"] == 1.0
    assert by_step[2]["regression/violation_share_diff"] == 1.0 and by_step[2]["regression/safety_worse"] == 1.0
    assert by_step[2]["regression/safety_alarm"] == 1.0 and by_step[2]["regression/safety_stop"] == 1.0
    assert (run_dir / "checkpoints" / "step-000002").is_dir()  # the run state to resume or inspect
