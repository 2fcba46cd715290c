"""kill -9 of `alight train` (embedded stack) in the middle of a step, then `--resume`.

The resumed run must serve at the same address with the same key, reap what the killed run left,
retry the attempts it lost as infra, finish every rollout, and end with one policy version per
trained step and the checkpoint at the last step.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from drill_kit import AGENTS, BIN, agent_pids, assert_settled, group_alive, kill_9, start, stop, wait_for

from alight_server.stacks.run_store import run_target
from alight_server.store.sql import SqlStore

pytestmark = pytest.mark.timeout(900)
STEPS = 2


def write_config(tmp_path: Path, answered: Path) -> Path:
    tasks = tmp_path / "tasks.jsonl"
    rows = [{"word": w, "answered_dir": str(answered), "pause_s": 1.5} for w in ["apple", "river", "stone"]]
    tasks.write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = {
        "model": "tiny",
        "dataset": {"train": str(tasks), "val_size": 0},
        "agent": {"entrypoint": f"{AGENTS / 'drill_agent.py'}:main"},
        "group_size": 2,  # a group of 2 is killed mid-step as surely as one of 3, at two agents' cost
        "tasks_per_step": 1,
        "steps": STEPS,
        "max_attempts": 3,
        "rollout_timeout_s": 120,
        "output_dir": str(tmp_path / "run"),
        "optimizer": {"lr": 1e-3},
        "checkpoint": {"every": 1},
        "inference": {"device": "cpu", "torch_threads": 1},
        "metrics": {"tensorboard": False},
        "review": {"audit_share": 0.0},  # an audited group would wait for a person, not train when the drill counts
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def drill(tmp_path: Path, rng: random.Random) -> dict[str, Any]:
    answered = tmp_path / "answered"
    answered.mkdir()
    config = write_config(tmp_path, answered)
    run = tmp_path / "run"
    log = tmp_path / "train.log"
    train = start([str(BIN / "alight"), "train", str(config), "--quiet"], log)
    try:
        # Mid-step 2: its agents have started (the step-1 checkpoint is on disk by then).
        wait_for(lambda: any(run.glob("logs/*-s00001-*/1.log")), "step 2's agents start", 600, train, log)
        delay = rng.uniform(0.0, 2.0)
        time.sleep(delay)
        left = agent_pids(run / "logs")
        kill_9(train)
    finally:
        stop(train)
    state = json.loads((run / "stack.json").read_text())
    assert (run / "stack.json").stat().st_mode & 0o777 == 0o600
    # The killed trainer's agents die with it (parent-death signal), none is left orphaned.
    wait_for(lambda: not any(group_alive(pid) for pid in left), "the killed run's agents are gone", 30)

    resumed = subprocess.run(
        [str(BIN / "alight"), "train", str(config), "--quiet", "--resume"], capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:] + log.read_text()[-2000:]
    assert json.loads((run / "stack.json").read_text()) == state  # same ports, same admin key
    assert not any(group_alive(pid) for pid in agent_pids(run / "logs") | left)

    counts = assert_settled(f"sqlite:///{run / 'alight.db'}", answered, run_target(run).kek_source())
    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    trained = [s["step"] for s in steps if "train/reward_mean" in s and s["train/groups"] > s["train/uniform_groups"]]
    assert sorted({s["step"] for s in steps if "train/reward_mean" in s}) == list(range(1, STEPS + 1))
    store = SqlStore(f"sqlite:///{run / 'alight.db'}", run_target(run).kek_source())
    try:
        pushed = [v.metadata.get("step") for v in store.list_policy_versions() if "step" in v.metadata]
    finally:
        store.close()
    # One version per trained step; a step the kill interrupted after its push may push once more.
    assert sorted(set(pushed)) == trained and (not trained or pushed[-1] == trained[-1]), (pushed, trained)
    checkpoints = sorted((run / "checkpoints").glob("step-*"))
    assert checkpoints[-1].name == f"step-{STEPS:06d}"
    return {**counts, "delay_s": round(delay, 2), "agents_reaped": len(left)}


def test_a_trainer_killed_mid_step_resumes_without_losing_the_step(tmp_path: Path) -> None:
    print(drill(tmp_path, random.Random()))


@pytest.mark.soak
@pytest.mark.timeout(3600)
def test_ten_trainer_kills_in_a_row_each_resume_cleanly(tmp_path: Path) -> None:
    rng = random.Random()
    for trial in range(10):
        (tmp_path / f"t{trial}").mkdir()
        print(f"trial {trial}:", drill(tmp_path / f"t{trial}", rng))
