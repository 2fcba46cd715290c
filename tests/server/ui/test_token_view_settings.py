"""The token view and capture health run the sample builder with the run's own `samples:` section.

A run that leaves a side model out (the Claude Code recipe: `exclude_models: ["*haiku*"]`) must show the
rows the trainer trains on, not rows it never sees; the settings reach both through one function.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from alight.schemas import AttemptFinish, ModelCall, RewardCreate, RolloutCreate, RunReport
from alight_server.trainer.config.run import TrainConfig, parse_config
from alight_server.trainer.step.samples import SampleConfig, build_samples
from alight_server.trajectories.join import build_trajectory
from alight_testing.tiny_run import tiny_run_config
from tests.server.trainer.samples_fixtures import model_call

if TYPE_CHECKING:
    from tests.conftest import LiveServer

RUN = "run7"
ROLLOUT = f"{RUN}-s00000-t000-k00"
MAIN = {"model": "claude-opus-4-8", "messages": []}
SIDE = {"model": "claude-haiku-4-5", "messages": []}  # Claude Code titling the session


def _run_excluding_a_side_model(live_server: LiveServer, folder: Path) -> TrainConfig:
    """A run whose config leaves `*haiku*` out, and one finished rollout of it: main, side, main."""
    raw = tiny_run_config(folder, "agent.py:main", [{"q": "x"}] * 4, samples={"exclude_models": ["*haiku*"]})
    config = parse_config(raw, folder)
    store = live_server.store
    store.report_run(RunReport(id=RUN, config=config.public_dump()))
    store.create_rollouts([RolloutCreate(id=ROLLOUT, task={"q": "x"}, group_id=ROLLOUT[:-4], metadata={"step": 0})])
    ((_, attempt),) = store.claim_attempts(1, ids=[ROLLOUT])
    calls: list[ModelCall] = [
        model_call(0, [1, 2], [10], rollout_id=ROLLOUT, attempt=attempt, request=MAIN),
        model_call(1, [7, 8], [70], rollout_id=ROLLOUT, attempt=attempt, request=SIDE),
        model_call(2, [1, 2, 10, 20], [11], rollout_id=ROLLOUT, attempt=attempt, request=MAIN),
    ]
    store.add_model_calls(calls)
    store.add_reward(ROLLOUT, RewardCreate(value=1.0, attempt=attempt, final=True))
    store.finish_attempt(ROLLOUT, attempt, AttemptFinish(status="succeeded"))
    return config


def test_the_token_view_shows_only_the_rows_the_trainer_trains_for_a_run_excluding_a_model(
    live_server: LiveServer, admin_client: httpx.Client, tmp_path: Path
) -> None:
    config = _run_excluding_a_side_model(live_server, tmp_path)
    trained, _ = build_samples(
        [build_trajectory(live_server.store, ROLLOUT)], SampleConfig.from_section(config.samples)
    )
    view = admin_client.get(f"/api/ui/rollouts/{ROLLOUT}/tokens").raise_for_status().json()
    assert view["run_id"] == RUN
    assert [row["calls"] for row in view["rows"]] == [list(calls) for calls in trained.row_calls] == [[0, 2]]
    assert view["dropped_calls"] == {"model_filter": 1}


def test_capture_health_counts_the_side_model_s_calls_as_left_out_for_a_run_excluding_it(
    live_server: LiveServer, admin_client: httpx.Client, tmp_path: Path
) -> None:
    _run_excluding_a_side_model(live_server, tmp_path)
    (step,) = admin_client.get(f"/api/ui/runs/{RUN}/health").raise_for_status().json()["steps"]
    assert (step["calls"], step["calls_used"], step["rows"]) == (3, 2, 1)
    assert step["dropped_calls"] == {"model_filter": 1}
