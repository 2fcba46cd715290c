"""`alight eval CONFIG --traces NAME`: the config's evaluator scores imported trajectories; no agent runs."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from alight.cli import app as cli
from alight.schemas import RewardSource
from alight_server.store import open_store
from alight_server.trajectories.join import build_trajectory
from tests.server.traces.conftest import imported_for_eval

SCORING = """
def score(task, trajectory):
    return float("sunny" in trajectory.final_output.text)
"""


def test_eval_with_traces_stores_the_evaluators_rewards_and_prints_the_baseline(tmp_path, upstream_url, monkeypatch):
    monkeypatch.setenv("ALIGHT_SECRET_KEY", "eval-traces-secret")
    # the first answer repeats the tool's "sunny"; the second has no tool, no sun
    db = imported_for_eval(tmp_path, upstream_url, ["call get_weather", "hello there"], SCORING)
    runner = CliRunner()
    for _ in range(2):  # a second evaluation stores nothing new (the evaluator's reward ids are deterministic)
        scored = runner.invoke(
            cli,
            ["eval", str(tmp_path / "config.yaml"), "--traces", "prod", "--db", db, "--out", str(tmp_path / "r.json")],
        )
        assert scored.exit_code == 0, scored.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["rollouts"] == 2 and report["success_rate"] == 0.5, report
    store = open_store(db)
    try:
        rewards = {r.id: store.list_rewards(r.id) for r in store.list_rollouts()}
        assert sorted(len(v) for v in rewards.values()) == [1, 1]
        assert all(v[0].source == RewardSource.EVALUATOR for v in rewards.values())
        finals = sorted(build_trajectory(store, rid).final_reward or 0.0 for rid in rewards)
        assert finals == [0.0, 1.0]
    finally:
        store.close()


def test_eval_with_traces_needs_an_evaluator_in_the_config(tmp_path):
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"prompt": "unused"}) + "\n")
    (tmp_path / "config.yaml").write_text(
        "model: tiny\ndataset:\n  train: tasks.jsonl\nagent:\n  entrypoint: a.py:main\n"
    )
    done = CliRunner().invoke(
        cli, ["eval", str(tmp_path / "config.yaml"), "--traces", "prod", "--db", str(tmp_path / "a.db")]
    )
    assert done.exit_code == 1 and "set `evaluator:`" in done.output
