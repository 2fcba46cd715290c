"""alight's estimator and loss, looked up in verl's own registries, give trainer/step/algorithm.py's numbers (1e-6)."""
# pyright: reportMissingImports=false
# (verl and omegaconf live in their own venv, .venv-verl; the type check runs in .venv)

from __future__ import annotations

import pytest
import torch
from verl_fixtures import actor_config, real_batch, require_verl

from alight_server.trainer.step.algorithm import (
    AlgorithmConfig,
    aggregation_weights,
    group_advantages,
    policy_loss,
    token_advantages,
)

pytestmark = pytest.mark.verl
require_verl()

from verl.trainer.ppo.core_algos import get_policy_loss_fn  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.workers.utils.losses import ppo_loss  # noqa: E402
from verl.workers.utils.padding import left_right_2_no_padding  # noqa: E402

from alight_server.trainer.backends.verl.data import to_data_proto  # noqa: E402
from alight_server.trainer.backends.verl.registry import register, with_advantages, with_token_weights  # noqa: E402

TOL = 1e-6


@pytest.fixture(autouse=True, scope="module")
def _registered():
    register()


def response_part(data, full: torch.Tensor) -> torch.Tensor:
    """A (R, T) alight tensor as verl's (R, A) response columns: real tokens keep their order in both layouts."""
    attention = data.batch["attention_mask"].bool()  # (R, P + A)
    real = torch.arange(full.shape[1]) < attention.sum(1)[:, None]  # (R, T) alight rows are right-padded
    out = torch.zeros(attention.shape, dtype=full.dtype)
    out[attention] = full[real]
    return out[:, data.batch["prompts"].shape[1] :]


def current_logprobs(batch, seed: int = 0) -> torch.Tensor:
    """A policy that moved away from the recorded one: recorded + noise on trained tokens. (R, T)"""
    noise = torch.randn(batch.old_logprobs.shape, generator=torch.Generator().manual_seed(seed)) * 0.3
    return batch.old_logprobs + noise * batch.loss_mask


@pytest.mark.parametrize(("estimator", "normalize_std"), [("grpo", True), ("grpo", False), ("rloo", True)])
def test_registered_estimator_gives_alights_token_advantages(estimator, normalize_std):
    batch = real_batch()
    data = with_advantages(to_data_proto(batch), estimator, normalize_std)  # verl's compute_advantage
    rollout_adv = group_advantages(batch.rollout_reward, batch.rollout_group, estimator, normalize_std)
    expected = token_advantages(rollout_adv, batch.row_rollout, batch.loss_mask)  # (R, T)
    assert torch.allclose(data.batch["advantages"], response_part(data, expected), atol=TOL, rtol=0)
    assert data.batch["advantages"].abs().max() > 0.1


@pytest.mark.parametrize("aggregation", ["per_rollout_mean", "token_mean", "seq_mean"])
def test_registered_loss_gives_alights_loss_and_gradient(tmp_path, aggregation):
    batch = real_batch()
    data = with_token_weights(with_advantages(to_data_proto(batch), "grpo"), aggregation)
    config = actor_config(tmp_path)

    logp = current_logprobs(batch).requires_grad_()
    weights = aggregation_weights(batch.loss_mask, batch.row_rollout, aggregation)
    advantages = token_advantages(
        group_advantages(batch.rollout_reward, batch.rollout_group), batch.row_rollout, batch.loss_mask
    )
    algorithm = AlgorithmConfig(clip_low=0.2, clip_high=0.28)
    expected, expected_metrics = policy_loss(logp, batch.old_logprobs, advantages, batch.loss_mask, weights, algorithm)
    (expected_grad,) = torch.autograd.grad(expected, logp)

    verl_logp = response_part(data, logp.detach()).requires_grad_()
    loss, metrics = get_policy_loss_fn("alight")(
        old_log_prob=data.batch["old_log_probs"],
        log_prob=verl_logp,
        advantages=data.batch["advantages"],
        response_mask=data.batch["response_mask"].bool(),
        loss_agg_mode=config.loss_agg_mode,
        config=config,
        rollout_is_weights=data.batch["rollout_is_weights"],
    )
    (grad,) = torch.autograd.grad(loss, verl_logp)
    assert abs(float(loss) - float(expected)) < TOL
    assert torch.allclose(grad, response_part(data, expected_grad), atol=TOL, rtol=0)
    assert metrics["actor/alight_clip_fraction"] == pytest.approx(expected_metrics["clip_fraction"], abs=TOL)
    assert 0 < metrics["actor/alight_clip_fraction"] < 1  # the clip really decided some tokens


def test_verls_own_ppo_loss_runs_the_alight_loss_on_the_no_padding_batch(tmp_path):
    """The path verl's actor takes: left_right_2_no_padding, then workers.utils.losses.ppo_loss."""
    batch = real_batch()
    data = with_token_weights(with_advantages(to_data_proto(batch), "grpo"), "per_rollout_mean")
    config = actor_config(tmp_path)
    td = left_right_2_no_padding(data.to_tensordict())
    tu.assign_non_tensor(
        td, dp_size=1, batch_num_tokens=int(data.batch["response_mask"].sum()), global_batch_size=len(data)
    )
    # The model's no-padding output: position i holds the logprob of token i + 1 of its row.
    logp = current_logprobs(batch)
    lengths = batch.attention_mask.sum(1).tolist()
    rows = [torch.cat([logp[r, 1:n], logp.new_zeros(1)]) for r, n in enumerate(lengths)]
    log_probs = torch.nested.as_nested_tensor(rows, layout=torch.jagged)

    loss, _ = ppo_loss(config, {"log_probs": log_probs}, td)

    weights = aggregation_weights(batch.loss_mask, batch.row_rollout, "per_rollout_mean")
    advantages = token_advantages(
        group_advantages(batch.rollout_reward, batch.rollout_group), batch.row_rollout, batch.loss_mask
    )
    expected, _ = policy_loss(
        logp, batch.old_logprobs, advantages, batch.loss_mask, weights, AlgorithmConfig(clip_high=0.28)
    )
    assert abs(float(loss) - float(expected)) < TOL


def test_rank_losses_scaled_by_the_data_parallel_size_average_to_the_batch_loss(tmp_path):
    batch = real_batch()
    data = with_token_weights(with_advantages(to_data_proto(batch), "grpo"), "per_rollout_mean")
    config = actor_config(tmp_path)
    logp = response_part(data, current_logprobs(batch))
    loss_fn = get_policy_loss_fn("alight")

    def loss_of(rows: list[int], dp_size: int) -> float:
        config.global_batch_info["dp_size"] = dp_size
        part = {k: data.batch[k][rows] for k in ("old_log_probs", "advantages", "response_mask", "rollout_is_weights")}
        loss, _ = loss_fn(
            part["old_log_probs"], logp[rows], part["advantages"], part["response_mask"].bool(),
            "token-mean", config, part["rollout_is_weights"],
        )  # fmt: skip
        return float(loss)

    whole = loss_of(list(range(len(data))), 1)
    ranks = [loss_of([0, 1, 2, 3], 2), loss_of([4, 5, 6], 2)]  # FSDP averages the ranks' gradients
    assert sum(ranks) / 2 == pytest.approx(whole, abs=TOL)


def test_the_loss_refuses_a_batch_without_alights_token_weights(tmp_path):
    data = with_advantages(to_data_proto(real_batch()), "grpo")
    with pytest.raises(ValueError, match="with_token_weights"):
        get_policy_loss_fn("alight")(
            data.batch["old_log_probs"], data.batch["old_log_probs"], data.batch["advantages"],
            data.batch["response_mask"].bool(), "token-mean", actor_config(tmp_path), None,
        )  # fmt: skip


def test_the_registered_sft_loss_is_the_token_mean_nll_of_the_trained_tokens(tmp_path):
    batch = real_batch()
    data = with_token_weights(with_advantages(to_data_proto(batch), "sft"), "token_mean")
    assert float(data.batch["advantages"].abs().max()) == 0.0  # alight_sft: no advantages
    logp = current_logprobs(batch)
    expected = -float((logp * batch.loss_mask).sum() / batch.loss_mask.sum())
    loss, metrics = get_policy_loss_fn("alight_sft")(
        old_log_prob=data.batch["old_log_probs"],
        log_prob=response_part(data, logp),
        advantages=data.batch["advantages"],
        response_mask=data.batch["response_mask"].bool(),
        loss_agg_mode="token-mean",
        config=actor_config(tmp_path),
        rollout_is_weights=data.batch["rollout_is_weights"],
    )
    assert abs(float(loss) - expected) < TOL
    assert metrics["actor/alight_loss"] == pytest.approx(expected, abs=TOL)
