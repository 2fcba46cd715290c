"""`--resume` continues a run exactly: same weights, optimizer, data cursor and step as an uninterrupted run."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from alight_server.stacks.opening import TrainingStacks
from alight_server.trainer.backends.embedded import EmbeddedBackend
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.run.checkpoint import latest_checkpoint, load_checkpoint
from alight_server.trainer.run.loop import TrainingRun

pytestmark = pytest.mark.timeout(300)


def test_resume_continues_from_the_last_checkpoint(tiny_config: Callable[..., TrainConfig]) -> None:
    first = tiny_config(steps=1, validation={"every": 0, "max_tasks": 1})
    TrainingRun(first, stacks=TrainingStacks(), show_progress=False).run()
    saved = load_checkpoint(latest_checkpoint(first.run_dir_checkpoints()) or first.run_dir_checkpoints())
    assert saved["step"] == 1

    # Without --resume an existing run is never overwritten.
    with pytest.raises(RuntimeError, match="pass --resume"):
        TrainingRun(first, stacks=TrainingStacks(), show_progress=False).run()

    resumed_config = first.model_copy(update={"steps": 2})
    resumed = TrainingRun(resumed_config, stacks=TrainingStacks(), resume=True, show_progress=False)
    result = resumed.run()

    assert isinstance(resumed.backend, EmbeddedBackend)
    # it started from the checkpointed weights and cursor, not from scratch
    assert result.history[0]["step"] == 0 and [r["step"] for r in result.history if "train/reward_mean" in r] == [1, 2]
    assert resumed.cursor.state() == {"epoch": 0, "position": 2 * first.tasks_per_step}
    assert resumed.backend.updates == 2
    final = load_checkpoint(latest_checkpoint(first.run_dir_checkpoints()))  # type: ignore[arg-type]
    assert final["step"] == 2
    moved = [
        n for n, t in final["trainer"]["trainable"].items() if not torch.equal(t, saved["trainer"]["trainable"][n])
    ]
    assert moved, "the resumed step did not change the weights"
    # the inference server got the checkpointed weights first (resume), then the new step's
    assert result.policy_version >= 2


def test_resume_without_a_checkpoint_says_so(tiny_config: Callable[..., TrainConfig]) -> None:
    with pytest.raises(RuntimeError, match="no checkpoint"):
        TrainingRun(tiny_config(), stacks=TrainingStacks(), resume=True, show_progress=False).run()
