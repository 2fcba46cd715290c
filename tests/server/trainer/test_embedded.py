"""The embedded backend on the tiny model: one step moves the weights; LoRA merges into servable names."""

from __future__ import annotations

import pytest
import torch

from alight_server.inference.models import load_policy
from alight_server.inference.weights import check_state_dict
from alight_server.trainer.config import AlgorithmOptions, LoraConfig, OptimizerConfig
from alight_server.trainer.embedded import EmbeddedTrainer, micro_batches, token_logprobs
from alight_server.trainer.samples import SampleBatch


def batch_for(model: torch.nn.Module, rows: int = 4, prompt: int = 6, response: int = 5) -> SampleBatch:
    """Two groups of two rollouts, one row each, rewards 1/0 in each group; logprobs from the model itself."""
    torch.manual_seed(0)
    ids = torch.randint(3, 200, (rows, prompt + response))
    mask = torch.zeros(rows, prompt + response)
    mask[:, prompt:] = 1
    with torch.no_grad():
        old = token_logprobs(model, ids, torch.ones_like(ids)) * mask
    return SampleBatch(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        loss_mask=mask,
        old_logprobs=old,
        step_returns=torch.zeros(rows, prompt + response),
        row_rollout=torch.arange(rows),
        row_group=torch.tensor([0, 0, 1, 1]),
        row_reward=torch.tensor([1.0, 0.0, 1.0, 0.0]),
        row_policy_version=torch.zeros(rows, dtype=torch.long),
        rollout_ids=[f"r{i}" for i in range(rows)],
        rollout_group=torch.tensor([0, 0, 1, 1]),
        rollout_reward=torch.tensor([1.0, 0.0, 1.0, 0.0]),
        group_ids=["g0", "g1"],
        row_calls=[(0,)] * rows,
    )


def test_logprobs_from_a_later_position_match_the_full_computation() -> None:
    model, _ = load_policy("tiny", device="cpu")
    ids = torch.randint(3, 200, (2, 10))
    full = token_logprobs(model, ids, torch.ones_like(ids))
    partial = token_logprobs(model, ids, torch.ones_like(ids), first_target=6)
    assert torch.allclose(full[:, 6:], partial[:, 6:], atol=1e-5)
    assert torch.all(partial[:, :6] == 0)


def test_one_step_raises_the_logprob_of_the_rewarded_rows() -> None:
    model, _ = load_policy("tiny", device="cpu")
    trainer = EmbeddedTrainer(model, OptimizerConfig(lr=1e-2), AlgorithmOptions())
    batch = batch_for(model)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    metrics = trainer.step(batch)
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())
    assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-4)  # on-policy: recorded == recomputed
    with torch.no_grad():
        after = (token_logprobs(model, batch.input_ids, batch.attention_mask) * batch.loss_mask).sum(1)
    gain = after - batch.old_logprobs.sum(1)
    assert gain[0] > gain[1] and gain[2] > gain[3]  # rewarded rows gained against their group mates


def test_micro_batches_respect_the_token_budget() -> None:
    model, _ = load_policy("tiny", device="cpu")
    batch = batch_for(model)
    groups = list(micro_batches(batch, token_budget=22))
    assert sorted(r for g in groups for r in g) == [0, 1, 2, 3]
    assert all(len(g) * 11 <= 22 for g in groups)


def test_lora_trains_adapters_only_and_merges_into_servable_weights() -> None:
    model, _ = load_policy("tiny", device="cpu")
    served, _ = load_policy("tiny", device="cpu")
    trainer = EmbeddedTrainer(
        model, OptimizerConfig(lr=1e-2), AlgorithmOptions(), LoraConfig(enabled=True, r=4, alpha=8)
    )
    assert all("lora_" in name for name in trainer.trainable_parameters())
    trainer.step(batch_for(model))
    weights = trainer.policy_weights()
    check_state_dict(served, weights)  # same names and shapes as the plain model
    base = served.state_dict()
    changed = [n for n, t in weights.items() if not torch.equal(t, base[n])]
    assert changed and all("proj" in n for n in changed)
