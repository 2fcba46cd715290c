"""The tiny model learns a trivially learnable reward through the whole stack; this test can fail."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import pytest

from alight_server.trainer.config import TrainConfig
from alight_server.trainer.loop import TrainingRun

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]


def test_vowel_reward_rises_by_a_clear_margin(tiny_config: Callable[..., TrainConfig]) -> None:
    config = tiny_config(
        steps=8,
        tasks_per_step=3,
        group_size=4,
        optimizer={"lr": 4e-2},
        validation={"every": 0, "samples_per_task": 4},
        inference={"device": "cpu", "torch_threads": 1, "val_temperature": 1.0},
        checkpoint={"every": 0},
    )
    result = TrainingRun(config, show_progress=False).run()

    rewards = [r["train/reward_mean"] for r in result.history if "train/reward_mean" in r]
    first, last = statistics.fmean(rewards[:2]), statistics.fmean(rewards[-2:])
    assert last > first + 0.08, f"train reward did not rise: {rewards}"
    assert result.val_before is not None and result.val_after is not None
    assert result.val_after > result.val_before + 0.08, (result.val_before, result.val_after)
