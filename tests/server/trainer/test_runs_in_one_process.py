"""Several `TrainingRun`s in one process: each run's inference engine, model and caches go when the run ends."""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from alight_server.inference.engine import InferenceEngine
from alight_server.stacks.opening import TrainingStacks
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.run.loop import TrainingRun

pytestmark = pytest.mark.timeout(400)


def alive(kind: type) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, kind))


def test_a_finished_run_leaves_no_engine_or_tensor_behind(
    tiny_config: Callable[..., TrainConfig], tmp_path: Path
) -> None:
    # Before the fix FastAPI's module-level cache of endpoints held the engine's routes (bound methods), so
    # every run left its engine, its model's weights and its prefix cache behind: measured 38 tensors per
    # tiny run, a whole second copy of the weights (and up to the prefix cache) per SmolLM2 run.
    engines, tensors = alive(InferenceEngine), alive(torch.Tensor)
    for n in range(2):
        # one task a step, its agents forked from one process that imported them (controller/zygote.py): the
        # claim is about what the run leaves in this process, not how many rollouts it ran
        config = tiny_config(steps=1, tasks_per_step=1, validation={"every": 0, "max_tasks": 1},
                             controller={"preload": True}, output_dir=str(tmp_path / f"run-{n}"))  # fmt: skip
        TrainingRun(config, stacks=TrainingStacks(), show_progress=False).run()
        assert alive(InferenceEngine) == engines, f"run {n + 1} left its inference engine alive"
        assert alive(torch.Tensor) <= tensors, f"run {n + 1} left tensors alive"
