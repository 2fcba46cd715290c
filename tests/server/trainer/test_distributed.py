"""Data-parallel embedded training on 2 CPU ranks (gloo): one step equals the single-process step, DDP and FSDP2."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from alight_server.inference.models import load_policy
from alight_server.trainer.backends.distributed import shard_rows
from alight_server.trainer.backends.embedded import EmbeddedBackend, make_embedded_backend
from alight_server.trainer.config.run import TrainConfig
from alight_testing.batches import batch_for

pytestmark = pytest.mark.timeout(300)


def test_rows_are_split_by_tokens_longest_first() -> None:
    # 9 to rank 0; 5, then 4 to rank 1 (now 9 tokens each); 3 to rank 0 on the tie (lower rank first).
    assert shard_rows([4, 9, 3, 5], 2) == [[1, 2], [0, 3]]
    assert shard_rows([7], 3) == [[0], [], []]


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_cpu_ranks_take_the_same_step_as_one_process(
    tiny_config: Callable[..., TrainConfig], strategy: str
) -> None:
    # 5 rows of 18 tokens, one micro-batch per row: rank 0 gets 3 passes, rank 1 two plus a zero-weight filler.
    optimizer = {"lr": 1e-3, "micro_batch_tokens": 18}
    reference, _ = load_policy("tiny", device="cpu")
    batch = batch_for(reference, rows=5, prompt=12, response=6)

    single = make_embedded_backend(tiny_config(optimizer=optimizer))
    single_metrics = single.step(batch)
    expected = single.state_dict()
    single.close()

    pair = make_embedded_backend(tiny_config(optimizer=optimizer, trainer={"world_size": 2, "strategy": strategy}))
    try:
        assert pair.world.size == 2 and len(pair.world.workers) == 1  # rank 0 started rank 1 itself
        pair_metrics = pair.step(batch)
        got = pair.state_dict()
    finally:
        pair.close()

    assert set(got["trainable"]) == set(expected["trainable"])
    moved = 0
    # Adam's first update is about lr * g/|g| per element (1e-3 here): where |g| is tiny, the order in which
    # ranks sum float32 gradients moves it by a few 1e-6 (3.4e-6 seen on an idle machine), a dropped or
    # double-counted row by ~1e-3.
    for name, tensor in expected["trainable"].items():
        difference = float((got["trainable"][name] - tensor).abs().max())
        assert difference <= 1e-5, (name, difference)
        moved += not torch.equal(tensor, reference.state_dict()[name])
    assert moved, "the step changed no parameter: the comparison would be vacuous"
    for key in ("loss", "tokens", "grad_norm", "advantage_mean", "ratio_mean"):
        assert pair_metrics[key] == pytest.approx(single_metrics[key], rel=1e-5, abs=1e-6), key


def test_alight_train_with_two_ranks_trains_and_serves_the_new_weights(tiny_config: Callable[..., TrainConfig]) -> None:
    from alight_server.stacks.opening import TrainingStacks
    from alight_server.trainer.run.loop import TrainingRun

    # No held-out rows, so no validation rounds before and after: the claim is the two-rank step and its push.
    config = tiny_config(steps=1, dataset={"val_size": 0}, trainer={"world_size": 2})
    run = TrainingRun(config, stacks=TrainingStacks(), show_progress=False)
    result = run.run()
    assert result.policy_version == 1  # one step, its weights pushed into inference once
    assert [r["step"] for r in result.history if "train/reward_mean" in r] == [1]
    assert (result.run_dir / "logs" / "rank-1.log").is_file()
    assert isinstance(run.backend, EmbeddedBackend) and run.backend.world.workers == []  # rank 1 exited at close
