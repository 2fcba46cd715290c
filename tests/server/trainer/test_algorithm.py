"""The algorithm pieces against small hand-computed values (the arithmetic is written out)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from alight_server.trainer.step.algorithm import (
    AlgorithmConfig,
    aggregation_weights,
    group_advantages,
    kl_k3,
    policy_loss,
    token_advantages,
    uniform_groups,
)

# Group 0: rewards 1, 0, 0, 1. Group 1: 0.5, 2. Group 2: a single rollout with 3.
REWARDS = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5, 2.0, 3.0])
GROUPS = torch.tensor([0, 0, 0, 0, 1, 1, 2])


def close(actual, expected, tol=1e-5):
    return torch.allclose(torch.as_tensor(actual, dtype=torch.float32), torch.tensor(expected), atol=tol)


def test_grpo_divides_by_the_unbiased_group_std():
    # Group 0: mean 0.5, centred ±0.5, variance (4 × 0.25) / 3 = 1/3, std 0.577350 -> ±0.866025.
    # Group 1: mean 1.25, centred ∓0.75, variance (2 × 0.5625) / 1 = 1.125, std 1.060660 -> ∓0.707107.
    # Group 2: alone, no baseline -> 0.
    advantages = group_advantages(REWARDS, GROUPS, "grpo", normalize_std=True, eps=0.0)
    assert close(advantages, [0.866025, -0.866025, -0.866025, 0.866025, -0.707107, 0.707107, 0.0])


def test_grpo_without_std_only_centres_on_the_group_mean():
    advantages = group_advantages(REWARDS, GROUPS, "grpo", normalize_std=False)
    assert close(advantages, [0.5, -0.5, -0.5, 0.5, -0.75, 0.75, 0.0])


def test_rloo_compares_each_rollout_with_the_mean_of_the_others():
    # 1 - (0 + 0 + 1)/3 = 2/3; 0 - (1 + 0 + 1)/3 = -2/3; 0.5 - 2 = -1.5; 2 - 0.5 = 1.5.
    advantages = group_advantages(REWARDS, GROUPS, "rloo", normalize_std=False)
    assert close(advantages, [2 / 3, -2 / 3, -2 / 3, 2 / 3, -1.5, 1.5, 0.0])


def test_a_group_with_equal_rewards_gets_zero_advantage_not_nan():
    advantages = group_advantages(torch.tensor([1.0, 1.0, 1.0]), torch.tensor([0, 0, 0]), "grpo", eps=1e-6)
    assert advantages.tolist() == [0.0, 0.0, 0.0]


def test_uniform_groups_are_reported_per_group():
    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0, 2.0, 2.0, 5.0])
    groups = torch.tensor([0, 0, 1, 1, 2, 2, 3])
    assert uniform_groups(rewards, groups).tolist() == [True, False, True, True]
    assert uniform_groups(rewards, groups)[groups].tolist() == [True, True, False, False, True, True, True]


def test_advantages_broadcast_to_the_trained_tokens_of_every_row_of_the_rollout():
    mask = torch.tensor([[0, 1, 1], [0, 0, 1], [1, 1, 0]], dtype=torch.float32)
    advantages = token_advantages(torch.tensor([2.0, -1.0]), torch.tensor([0, 0, 1]), mask)
    assert advantages.tolist() == [[0, 2, 2], [0, 0, 2], [-1, -1, 0]]


def test_per_turn_credit_adds_weighted_step_rewards_to_go():
    mask = torch.tensor([[0, 1, 1, 0, 1]], dtype=torch.float32)
    step_returns = torch.tensor([[0, 0.75, 0.75, 0, 0.25]])
    # 0.5 + 0.5 × 0.75 = 0.875; 0.5 + 0.5 × 0.25 = 0.625.
    advantages = token_advantages(torch.tensor([0.5]), torch.tensor([0]), mask, step_returns, step_reward_coef=0.5)
    assert close(advantages, [[0, 0.875, 0.875, 0, 0.625]])


# Rollout 0 has two rows with 2 and 1 trained tokens; rollout 1 one row with 4.
MASK = torch.tensor([[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.float32)
ROW_ROLLOUT = torch.tensor([0, 0, 1])


def test_token_mean_weighs_every_token_the_same():
    assert close(aggregation_weights(MASK, ROW_ROLLOUT, "token_mean"), (MASK / 7).tolist())


def test_seq_mean_weighs_every_row_the_same():
    # Each row 1/3, spread over its tokens: 1/6, 1/3, 1/12.
    weights = aggregation_weights(MASK, ROW_ROLLOUT, "seq_mean")
    assert close(weights, [[1 / 6, 1 / 6, 0, 0], [1 / 3, 0, 0, 0], [1 / 12] * 4])


def test_per_rollout_mean_weighs_every_rollout_the_same_however_many_rows_and_tokens():
    # Each rollout 1/2: rollout 0 over its 3 tokens (1/6 each), rollout 1 over its 4 (1/8 each).
    weights = aggregation_weights(MASK, ROW_ROLLOUT, "per_rollout_mean")
    assert close(weights, [[1 / 6, 1 / 6, 0, 0], [1 / 6, 0, 0, 0], [1 / 8] * 4])


@pytest.mark.parametrize(
    ("aggregation", "expected"),
    [
        # Ratio 1, advantage +1 on rollout 0 and -1 on rollout 1; the token loss is -advantage.
        ("per_rollout_mean", 0.5 * -1 + 0.5 * 1),  # 0
        ("token_mean", (3 * -1 + 4 * 1) / 7),  # 1/7
        ("seq_mean", (-1 - 1 + 1) / 3),  # -1/3
    ],
)
def test_aggregations_differ_on_unequal_lengths(aggregation, expected):
    advantages = token_advantages(torch.tensor([1.0, -1.0]), ROW_ROLLOUT, MASK)
    logprobs = torch.full((3, 4), -1.0, requires_grad=True)
    weights = aggregation_weights(MASK, ROW_ROLLOUT, aggregation)
    loss, metrics = policy_loss(logprobs, logprobs.detach(), advantages, MASK, weights, AlgorithmConfig())
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert metrics["loss"] == pytest.approx(expected, abs=1e-6)
    assert metrics["tokens"] == 7


def test_clipping_stops_the_gradient_on_both_sides_only_where_it_binds():
    config = AlgorithmConfig(clip_low=0.2, clip_high=0.3)
    old = torch.full((1, 4), -1.0)
    ratios = torch.tensor([[1.5, 0.5, 0.5, 1.5]])
    logprobs = (old + ratios.log()).requires_grad_()
    advantages = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
    mask = torch.ones(1, 4)
    weights = aggregation_weights(mask, torch.tensor([0]), "token_mean")
    loss, metrics = policy_loss(logprobs, old, advantages, mask, weights, config)
    # Token losses max(-A r, -A clip(r, 0.8, 1.3)):
    #   A=+1 r=1.5: max(-1.5, -1.3) = -1.3  (high clip binds)
    #   A=+1 r=0.5: max(-0.5, -0.8) = -0.5
    #   A=-1 r=0.5: max( 0.5,  0.8) =  0.8  (low clip binds)
    #   A=-1 r=1.5: max( 1.5,  1.3) =  1.5
    # Mean: (-1.3 - 0.5 + 0.8 + 1.5) / 4 = 0.125.
    assert loss.item() == pytest.approx(0.125, abs=1e-6)
    loss.backward()
    # d/dlogp of -A r is -A r where unclipped, 0 where clipped; × 1/4: [0, -0.125, 0, 0.375].
    assert close(logprobs.grad, [[0.0, -0.125, 0.0, 0.375]])  # type: ignore[arg-type]
    assert metrics["clip_fraction"] == 0.5
    assert metrics["clip_low_fraction"] == 0.25
    assert metrics["clip_high_fraction"] == 0.25
    assert metrics["ratio_mean"] == pytest.approx(1.0)
    assert metrics["ratio_max"] == pytest.approx(1.5)
    # k3 of KL(old || new): r - 1 - log r = 0.094535 (r=1.5), 0.193147 (r=0.5); mean 0.143841.
    assert metrics["approx_kl"] == pytest.approx(0.143841, abs=1e-5)


def test_truncated_importance_sampling_caps_the_old_to_rollout_ratio():
    config = AlgorithmConfig(tis_cap=2.0)
    logprobs = torch.tensor([[-1.0, -1.0]], requires_grad=True)
    old = logprobs.detach().clone()
    rollout = torch.tensor([[-2.0, -0.5]])
    # pi_old / pi_rollout = e^1 = 2.718 -> capped at 2; e^-0.5 = 0.606531 kept.
    # Ratio 1 and advantage 1: token losses -2 and -0.606531; mean -1.303265.
    mask = torch.ones(1, 2)
    weights = aggregation_weights(mask, torch.tensor([0]), "token_mean")
    advantages = torch.ones(1, 2)
    loss, metrics = policy_loss(logprobs, old, advantages, mask, weights, config, rollout_logprobs=rollout)
    assert loss.item() == pytest.approx(-1.303265, abs=1e-5)
    assert metrics["tis_capped_fraction"] == 0.5
    assert metrics["tis_weight_mean"] == pytest.approx(1.303265, abs=1e-5)
    loss.backward()
    assert close(logprobs.grad, [[-1.0, -0.303265]])  # type: ignore[arg-type]  # -A × w × r / 2


def test_kl_k3_matches_the_formula():
    # ref - logp = -0.5: e^-0.5 + 0.5 - 1 = 0.106531; ref - logp = 1: e - 1 - 1 = 0.718282; equal: 0.
    kl = kl_k3(torch.tensor([-1.0, -2.0, -3.0]), torch.tensor([-1.5, -1.0, -3.0]))
    assert close(kl, [0.106531, 0.718282, 0.0])


def test_kl_penalty_is_added_with_its_coefficient():
    config = AlgorithmConfig(kl_coef=0.1)
    logprobs = torch.tensor([[-1.0, -2.0]])
    ref = torch.tensor([[-1.5, -1.0]])
    mask = torch.ones(1, 2)
    weights = aggregation_weights(mask, torch.tensor([0]), "token_mean")
    loss, metrics = policy_loss(logprobs, logprobs, torch.zeros(1, 2), mask, weights, config, ref_logprobs=ref)
    # Zero advantage: the loss is 0.1 × mean(0.106531, 0.718282) = 0.0412406.
    assert loss.item() == pytest.approx(0.0412406, abs=1e-6)
    assert metrics["kl_ref"] == pytest.approx(0.4124065, abs=1e-6)
    with pytest.raises(ValueError, match=r"kl_coef=0\.1 needs ref_logprobs"):
        policy_loss(logprobs, logprobs, torch.zeros(1, 2), mask, weights, config)


def test_padding_and_context_tokens_change_nothing():
    mask = torch.tensor([[0.0, 1.0, 1.0, 0.0]])
    logprobs = torch.tensor([[-9.0, -1.0, -2.0, -30.0]])
    old = torch.tensor([[0.0, -1.2, -1.9, 0.0]])  # 0 outside the mask, as the sample builder writes it
    advantages = torch.tensor([[0.0, 1.0, 1.0, 0.0]])
    weights = aggregation_weights(mask, torch.tensor([0]), "token_mean")
    entropy = torch.tensor([[float("inf"), 0.5, 1.5, float("nan")]])
    _, metrics = policy_loss(logprobs, old, advantages, mask, weights, AlgorithmConfig(), entropy=entropy)
    # Ratios e^0.2 = 1.221403 and e^-0.1 = 0.904837 only.
    assert metrics["ratio_max"] == pytest.approx(math.exp(0.2), abs=1e-5)
    assert metrics["ratio_mean"] == pytest.approx((math.exp(0.2) + math.exp(-0.1)) / 2, abs=1e-5)
    assert metrics["entropy"] == pytest.approx(1.0)
    clean, _ = policy_loss(logprobs, old, advantages, mask, weights, AlgorithmConfig())
    garbage = torch.tensor([[float("inf"), 1.0, 1.0, float("nan")]])  # whatever padding holds, inf × 0 is no NaN
    loss, _ = policy_loss(logprobs, old, garbage, mask, weights, AlgorithmConfig())
    assert loss.item() == pytest.approx(clean.item())


def test_micro_batches_sliced_from_batch_weights_add_up_to_the_batch_loss():
    torch.manual_seed(0)
    logprobs = -torch.rand(3, 4) * 3
    old = logprobs + torch.randn(3, 4) * 0.3
    advantages = token_advantages(torch.tensor([1.5, -0.5]), ROW_ROLLOUT, MASK)
    weights = aggregation_weights(MASK, ROW_ROLLOUT, "per_rollout_mean")
    config = AlgorithmConfig()
    whole, _ = policy_loss(logprobs, old * MASK, advantages, MASK, weights, config)
    parts = sum(
        policy_loss(logprobs[rows], (old * MASK)[rows], advantages[rows], MASK[rows], weights[rows], config)[0]
        for rows in ([0], [1, 2])
    )
    assert parts.item() == pytest.approx(whole.item(), abs=1e-6)  # type: ignore[union-attr]


def test_bad_config_values_are_named():
    with pytest.raises(ValueError, match=r"estimator\s+Input should be 'grpo', 'rloo', 'sft' or 'distill'"):
        AlgorithmConfig(estimator="ppo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"tis_cap\s+Input should be greater than 0"):
        AlgorithmConfig(tis_cap=0)
    with pytest.raises(ValueError, match=r"clip_low\s+Input should be less than 1"):
        AlgorithmConfig(clip_low=1.5)


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 5), min_size=1, max_size=8),
    owners=st.lists(st.integers(0, 3), min_size=8, max_size=8),
)
def test_per_rollout_mean_gives_every_rollout_with_tokens_an_equal_share(lengths, owners):
    width = max(lengths) or 1
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).float()  # (R, T)
    row_rollout = torch.tensor(owners[: len(lengths)])
    weights = aggregation_weights(mask, row_rollout, "per_rollout_mean")
    per_rollout = torch.zeros(4).index_add_(0, row_rollout, weights.sum(1))
    with_tokens = torch.zeros(4).index_add_(0, row_rollout, mask.sum(1)) > 0
    if with_tokens.any():
        assert torch.allclose(
            per_rollout[with_tokens], torch.full((int(with_tokens.sum()),), 1 / int(with_tokens.sum()))
        )
    assert per_rollout[~with_tokens].abs().sum() == 0
    assert bool((weights[mask == 0] == 0).all())


@settings(max_examples=60, deadline=None)
@given(
    rewards=st.lists(st.floats(-10, 10, allow_nan=False), min_size=1, max_size=12),
    estimator=st.sampled_from(["grpo", "rloo"]),
    normalize_std=st.booleans(),
    data=st.data(),
)
def test_group_advantages_sum_to_zero_within_every_group(rewards, estimator, normalize_std, data):
    groups = data.draw(st.lists(st.integers(0, 2), min_size=len(rewards), max_size=len(rewards)))
    group = torch.tensor(groups)
    advantages = group_advantages(torch.tensor(rewards), group, estimator, normalize_std)
    assert torch.isfinite(advantages).all()
    sums = torch.zeros(3).index_add_(0, group, advantages)
    assert torch.allclose(sums, torch.zeros(3), atol=1e-3)


@pytest.mark.parametrize("estimator", ["grpo", "rloo"])
def test_equal_rewards_that_float_rounding_does_not_centre_exactly_still_get_zero(estimator):
    # float32 mean of three 1.6449229 differs from each by an ulp; divided by std + eps that was ~0.1 each.
    advantages = group_advantages(torch.full((3,), 1.6449229130138505), torch.zeros(3, dtype=torch.long), estimator)
    assert advantages.tolist() == [0.0, 0.0, 0.0]
