"""The embedded backend on the tiny model: one step moves the weights; LoRA merges into servable names."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from samples_fixtures import model_call, step_reward, trajectory

from alight.schemas import Trajectory, TrajectoryCall
from alight_server.inference.models import load_policy
from alight_server.inference.weights import check_state_dict
from alight_server.trainer.backends.accumulation import micro_batches, token_logprobs
from alight_server.trainer.backends.embedded import EmbeddedBackend
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.config.sections import LoraConfig, OptimizerConfig
from alight_server.trainer.step.algorithm import AlgorithmConfig
from alight_server.trainer.step.distill import step_advantages
from alight_server.trainer.step.samples import SampleConfig, build_samples
from alight_testing.batches import batch_for


def test_logprobs_from_a_later_position_match_the_full_computation() -> None:
    model, _ = load_policy("tiny", device="cpu")
    ids = torch.randint(3, 200, (2, 10))
    full = token_logprobs(model, ids, torch.ones_like(ids))
    partial = token_logprobs(model, ids, torch.ones_like(ids), first_target=6)
    assert torch.allclose(full[:, 6:], partial[:, 6:], atol=1e-5)
    assert torch.all(partial[:, :6] == 0)


def test_one_step_raises_the_logprob_of_the_rewarded_rows() -> None:
    model, _ = load_policy("tiny", device="cpu")
    trainer = EmbeddedBackend(model, OptimizerConfig(lr=1e-2), AlgorithmConfig())
    batch = batch_for(model)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    metrics = trainer.step(batch)
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())
    assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-4)  # on-policy: recorded == recomputed
    # The loop counts uniform groups on the whole batch and hands the backend only the others: a count of
    # its own here overwrote the loop's train/uniform_groups with 0 in every step that trained.
    assert "uniform_groups" not in metrics
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
    trainer = EmbeddedBackend(
        model, OptimizerConfig(lr=1e-2), AlgorithmConfig(), LoraConfig(enabled=True, r=4, alpha=8)
    )
    trained = [name for name, p in trainer.model.named_parameters() if p.requires_grad]
    assert trained and all("lora_" in name for name in trained)
    trainer.step(batch_for(model))
    weights = trainer.policy_weights()
    check_state_dict(served, weights)  # same names and shapes as the plain model
    base = served.state_dict()
    changed = [n for n, t in weights.items() if not torch.equal(t, base[n])]
    assert changed and all("proj" in n for n in changed)


def two_rollouts_with_a_step_reward() -> list[Trajectory]:
    """One group: r1 (reward 1) whose only call has a step reward of 0.5 linked to it, and r2 (reward 0)."""
    first = model_call(1, [1, 2], [3, 4], rollout_id="r1")
    second = model_call(1, [1, 2], [5, 6], rollout_id="r2")
    return [
        trajectory([TrajectoryCall(call=first, rewards=[step_reward(first, 0.5)])], rollout_id="r1", reward=1.0),
        trajectory([second], rollout_id="r2", reward=0.0),
    ]


@pytest.mark.parametrize(
    ("coef", "expected"),
    [
        # GRPO: rewards 1, 0 centre to +-0.5; the unbiased group std is sqrt(0.5), so A = +-0.5 / 0.7071 = +-0.7071.
        (0.0, [[0, 0, 0.70711, 0.70711], [0, 0, -0.70711, -0.70711]]),
        # Per-turn credit adds coef x the call's step reward to go on its tokens: 0.7071 + 0.5 x 0.5 = 0.9571.
        (0.5, [[0, 0, 0.95711, 0.95711], [0, 0, -0.70711, -0.70711]]),
    ],
)
def test_step_rewards_linked_to_calls_change_the_advantages_by_the_configured_coefficient(
    tiny_config: Callable[..., TrainConfig], coef: float, expected: list[list[float]]
) -> None:
    config = tiny_config(algorithm={"step_reward_coef": coef})
    batch, _ = build_samples(two_rollouts_with_a_step_reward(), SampleConfig.from_section(config.samples))
    model, _ = load_policy("tiny", device="cpu")
    backend = EmbeddedBackend(model, config.optimizer, config.algorithm)
    assert torch.allclose(step_advantages(batch, backend.algorithm), torch.tensor(expected), atol=1e-4)
    # and the step trains on them: the mean advantage over the 4 trained tokens
    metrics = backend.step(batch)
    assert metrics["advantage_mean"] == pytest.approx(sum(map(sum, expected)) / 4, abs=1e-4)


def test_tis_weighs_stale_tokens_by_the_capped_ratio_to_the_recorded_logprobs() -> None:
    model, _ = load_policy("tiny", device="cpu")
    trainer = EmbeddedBackend(model, OptimizerConfig(lr=1e-2), AlgorithmConfig(tis_cap=2.0))
    batch = batch_for(model)
    # Rows 0-1 were generated by an older policy that found their tokens e^-1 as likely (ratio e > cap);
    # rows 2-3 by the current one (ratio 1).
    batch.old_logprobs[:2] -= batch.loss_mask[:2]
    metrics = trainer.step(batch)
    assert metrics["tis_ratio_max"] == pytest.approx(torch.e, rel=1e-3)
    assert metrics["tis_ratio_mean"] == pytest.approx((torch.e + 1) / 2, rel=1e-3)
    assert metrics["tis_capped_fraction"] == pytest.approx(0.5, abs=1e-6)
    assert metrics["tis_weight_mean"] == pytest.approx(1.5, rel=1e-3)  # min(e, 2) and 1
    assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-4)  # against pi_old recomputed by these weights


def test_a_row_weight_scales_that_rows_share_of_the_loss() -> None:
    model, _ = load_policy("tiny", device="cpu")
    batch = batch_for(model)
    losses = []
    for weight in (1.0, 0.5):
        torch.manual_seed(0)
        fresh, _ = load_policy("tiny", device="cpu")
        batch.row_weight = torch.full((batch.num_rows,), weight)
        losses.append(EmbeddedBackend(fresh, OptimizerConfig(lr=1e-2), AlgorithmConfig()).step(batch)["pg_loss"])
    assert losses[1] == pytest.approx(losses[0] * 0.5, rel=1e-4)
