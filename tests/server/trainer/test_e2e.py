"""End to end on the tiny model: server + controller + inference + trainer, a real agent subprocess, two steps."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import torch

from alight.api_models import RolloutQuery
from alight.schemas import TERMINAL_STATES, Mode
from alight_server.inference.models import load_policy
from alight_server.stacks.opening import TrainingStacks
from alight_server.stacks.run_store import open_run_store
from alight_server.trainer.backends.embedded import EmbeddedBackend
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.run.loop import TrainingRun
from alight_server.trainer.step.samples import SampleBatch

pytestmark = pytest.mark.timeout(300)


def test_two_steps_train_the_served_policy_on_gateway_token_ids(
    tiny_config: Callable[..., TrainConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tiny_config()
    threads_outside = torch.get_num_threads()
    config.trainer.torch_threads = threads_outside + 1  # the update's own thread count
    batches: list[SampleBatch] = []
    threads_in_step: list[int] = []
    original_step = EmbeddedBackend.step

    def recording_step(self: EmbeddedBackend, batch: SampleBatch) -> dict[str, float]:
        batches.append(batch)
        threads_in_step.append(torch.get_num_threads())
        return original_step(self, batch)

    monkeypatch.setattr(EmbeddedBackend, "step", recording_step)
    run = TrainingRun(config, stacks=TrainingStacks(), show_progress=False)
    result = run.run()

    # the weights changed, and inference was told twice: two new policy versions
    base, _ = load_policy("tiny", device="cpu")
    assert isinstance(run.backend, EmbeddedBackend)
    trained = dict(run.backend.model.named_parameters())
    changed = [n for n, p in base.named_parameters() if not torch.equal(p, trained[n].detach())]
    assert changed, "no parameter changed after two training steps"
    assert result.policy_version == 2
    assert len(batches) == 2
    assert threads_in_step == [threads_outside + 1] * 2
    assert torch.get_num_threads() == threads_outside

    store = open_run_store(result.run_dir)
    rollouts = store.list_rollouts(RolloutQuery(limit=1000))
    train = [r for r in rollouts if r.mode == Mode.TRAIN]
    assert len(train) == 2 * 2 * 2  # steps x tasks x group
    assert {r.mode for r in rollouts} == {Mode.TRAIN, Mode.VAL}
    assert all(r.state in TERMINAL_STATES for r in rollouts)
    # the first step's rollouts (same weights) were created with the first validation, not after it ended
    first_val = [r for r in rollouts if r.mode == Mode.VAL and r.metadata["step"] == 0]
    assert max(r.created_at for r in train if r.metadata["step"] == 0) < max(r.updated_at for r in first_val)

    # step 2's calls were served by policy version 1, step 1's by version 0
    versions_by_step: dict[int, set[Any]] = {}
    for rollout in train:
        calls = store.list_model_calls(rollout.id)
        assert len(calls) == 2, f"the agent makes two model calls around its tool, got {len(calls)}"
        versions_by_step.setdefault(rollout.metadata["step"], set()).update(c.policy_version for c in calls)
    assert versions_by_step == {0: {0}, 1: {1}}

    # every generated token the trainer learned from is one the gateway recorded, logprob included
    for batch in batches:
        recorded = {
            (tuple(c.response_token_ids), tuple(round(x, 4) for x in c.response_logprobs))
            for rid in batch.rollout_ids
            for c in store.list_model_calls(rid)
        }
        for row in range(batch.num_rows):
            mask = batch.loss_mask[row].bool()
            ids = tuple(batch.input_ids[row][mask].tolist())
            assert ids, "a row without trained tokens"
            logprobs = tuple(round(x, 4) for x in batch.old_logprobs[row][mask].tolist())
            joined_ids = [i for call_ids, _ in recorded for i in call_ids]
            assert set(ids) <= set(joined_ids)
            assert any(ids[: len(c)] == c for c, _ in recorded if c)
            assert any(logprobs[: len(lp)] == lp for _, lp in recorded if lp)
    store.close()

    # each step's integrity: violations and review flags among its rollouts, and how many wait for a person
    lines = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [line for line in lines if "train/reward_mean" in line]
    integrity = ("integrity/violation_share", "integrity/flag_share", "integrity/quarantined")
    assert len(steps) == 2 and all(line[key] == 0.0 for line in steps for key in integrity), steps
    assert result.plot_path is not None and result.plot_path.stat().st_size > 0
    assert result.val_before is not None and result.val_after is not None
