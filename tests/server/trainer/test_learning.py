"""The tiny model learns a trivially learnable reward through the whole stack; this test can fail."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from alight_server.stacks.opening import TrainingStacks
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.run.loop import TrainingRun
from tests.server.trainer.conftest import WORDS

pytestmark = [pytest.mark.timeout(1200), pytest.mark.slow]

RUNS = 2
# Validation asks about words no training task names (the training tasks are conftest's WORDS): a rise there is
# the policy's, not a memorised reply to a prompt it was trained on.
HELD_OUT = ["cloud", "forest"]
# The tool agent's plain-httpx variant: 192 agent processes per run, each spared the openai import (~1.5 CPU-s).
AGENT = "main_http"


def held_out_tasks(folder: Path) -> Path:
    """A validation file of the held-out words (disjoint from every training task's word)."""
    assert not set(HELD_OUT) & set(WORDS)
    val = folder / "val.jsonl"
    val.write_text("".join(json.dumps({"word": w}) + "\n" for w in HELD_OUT))
    return val


def first_run_that_learns(
    tiny_config: Callable[..., TrainConfig], tmp_path: Path, name: str, **settings: Any
) -> list[dict[str, Any]]:
    """Up to RUNS independent 10-step runs (each its own seed) of the vowel task with `settings`; [] as soon as
    one learns (train last 3 vs first 3 steps > +0.03 and held-out validation > +0.05), else what each saw."""
    val = held_out_tasks(tmp_path)
    seen: list[dict[str, Any]] = []
    for run in range(RUNS):
        config = tiny_config(
            seed=run,
            function=AGENT,
            steps=10,
            tasks_per_step=2,
            group_size=8,
            dataset={"val": str(val), "val_size": 0},
            optimizer={"lr": 1.5e-2},
            validation={"every": 0, "samples_per_task": 8},
            inference={"device": "cpu", "torch_threads": 1, "val_temperature": 1.0},
            checkpoint={"every": 0},
            output_dir=str(tmp_path / f"{name}{run}"),
            **settings,
        )
        result = TrainingRun(config, stacks=TrainingStacks(), show_progress=False).run()
        rewards = [r["train/reward_mean"] for r in result.history if "train/reward_mean" in r]
        assert len(rewards) == 10 and result.val_before is not None and result.val_after is not None
        if settings.get("algorithm", {}).get("tis_cap"):
            assert any("train/tis_ratio_mean" in r for r in result.history)
        first, last = statistics.fmean(rewards[:3]), statistics.fmean(rewards[-3:])
        seen.append({"train": rewards, "val": (result.val_before, result.val_after)})
        if last > first + 0.03 and result.val_after > result.val_before + 0.05:
            return []
    return seen


def test_vowel_reward_rises_by_a_clear_margin(tiny_config: Callable[..., TrainConfig], tmp_path: Path) -> None:
    """Train reward and validation on held-out words both rise by a clear margin, in one of two independent runs.

    RL on the tiny random model varies from run to run: in full-suite runs one
    run in several learned too slowly to clear the margins (train +0.02) or, at
    lr 2e-2, collapsed after step 8 (train 0.43 -> 0.21). A second run gets a
    chance; a trainer that does not learn fails both. The second run has its own
    seed (data order and split, LoRA initialisation, sampling): with the first's it
    would replay much of the same run rather than be an independent one.
    """
    seen = first_run_that_learns(
        tiny_config,
        tmp_path,
        "sync",
        # Measured in 10 steps over four runs: train (last 3 vs first 3 steps) +0.13/+0.20/+0.18 and
        # +0.02 once; val +0.14/+0.40/+0.30. lr 1e-2 with per_rollout_mean learned nothing in 8 steps
        # (val +0.01), so these margins separate learning from noise.
        algorithm={"aggregation": "token_mean"},
        # A step's 16 rollouts in one wave (no wave waits on its slowest), each forked from one process that
        # imported the agent (docs/controller.md, preloaded starts): 192 interpreter starts and SDK imports
        # per run were about half of its CPU, and say nothing about learning.
        controller={"concurrency": 16, "preload": True},
    )
    assert not seen, f"no run learned (train last 3 vs first 3 steps > +0.03, val > +0.05): {seen}"


@pytest.mark.async_e2e
def test_vowel_reward_rises_in_asynchronous_mode(tiny_config: Callable[..., TrainConfig], tmp_path: Path) -> None:
    """The same learning check with groups carried over across updates (staleness <= 1, TIS on); as above, the
    second run has its own seed."""
    seen = first_run_that_learns(
        tiny_config,
        tmp_path,
        "async",
        algorithm={"aggregation": "token_mean", "tis_cap": 2.0},
        async_rollout={"enabled": True, "active_groups": 3, "max_staleness": 1},
        controller={"concurrency": 24},
    )
    assert not seen, f"no asynchronous run learned (train last 3 vs first 3 > +0.03, val > +0.05): {seen}"
