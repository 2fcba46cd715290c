"""Supervised fine-tuning on traces (algorithm.estimator: sft) and rows imported as text under a policy-gradient step.

Traces are rendered the way `alight data import` renders text-only logs: the policy's own chat template and
tokenizer, flagged `fidelity:rendered`, no logprobs. The tiny model learns the traces' format from them
(`ANSWER: <the word asked about>`), and the held-out traces' replies, about words it never saw, must become likelier.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from samples_fixtures import model_call, trajectory

from alight.schemas import RENDERED_FLAG, Trajectory
from alight_server.inference.models import load_policy
from alight_server.trainer.backends.accumulation import token_logprobs
from alight_server.trainer.backends.embedded import EmbeddedBackend
from alight_server.trainer.backends.verl.registry import alight_sft_loss
from alight_server.trainer.config.sections import OptimizerConfig
from alight_server.trainer.step.algorithm import AlgorithmConfig, aggregation_weights
from alight_server.trainer.step.rendered import RenderedRowsError, rows_for_step
from alight_server.trainer.step.samples import SampleBatch, SampleConfig, build_samples

TRAIN_WORDS = ["apple", "river", "stone", "plant", "green", "table", "light", "water"]
HELD_OUT_WORDS = ["cloud", "forest", "bread", "music"]


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return load_policy("tiny", device="cpu")[1]


def rendered_trace(tokenizer: Any, word: str, *, rendered: bool = True, reward: float | None = 1.0) -> Trajectory:
    """One logged conversation known as text, rendered with the policy's template: answer with `word`."""
    messages = [{"role": "user", "content": f"repeat: {word}"}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    response = tokenizer.encode(f"ANSWER: {word}<|im_end|>", add_special_tokens=False)
    flags = [RENDERED_FLAG] if rendered else []
    call = model_call(0, prompt, response, rollout_id=word, flags=flags, logprobs=[] if rendered else None)
    return trajectory([call], rollout_id=word, group_id=None, reward=reward)


def traces_batch(tokenizer: Any, words: list[str], **kwargs: Any) -> SampleBatch:
    config = SampleConfig(pad_token_id=int(tokenizer.pad_token_id or 0))
    batch, report = build_samples([rendered_trace(tokenizer, w, **kwargs) for w in words], config)
    assert report.rows == len(words), report
    return batch


def mean_trained_logprob(model: Any, batch: SampleBatch) -> float:
    with torch.no_grad():
        logp = token_logprobs(model, batch.input_ids, batch.attention_mask)  # (R, T)
    return float((logp * batch.loss_mask).sum() / batch.loss_mask.sum())


def test_a_rendered_call_is_kept_in_a_row_marked_rendered_with_no_logprobs(tokenizer: Any) -> None:
    batch = traces_batch(tokenizer, ["apple"])
    assert batch.row_rendered.tolist() == [True]
    assert batch.loss_mask.sum() > 0
    assert torch.all(batch.old_logprobs == 0)  # nothing recorded: 0 by the padding's convention


def test_sft_lowers_the_loss_and_makes_held_out_traces_likelier(tokenizer: Any) -> None:
    torch.manual_seed(0)
    model, _ = load_policy("tiny", device="cpu")
    backend = EmbeddedBackend(model, OptimizerConfig(lr=3e-3), AlgorithmConfig(estimator="sft"))
    train, held_out = traces_batch(tokenizer, TRAIN_WORDS), traces_batch(tokenizer, HELD_OUT_WORDS)
    held_out_before = mean_trained_logprob(model, held_out)
    losses = [backend.step(train)["loss"] for _ in range(8)]
    held_out_after = mean_trained_logprob(model, held_out)
    assert losses[-1] < 0.5 * losses[0], losses
    # the format, not the words: replies about words never trained on gained 2 nats per token (measured 4.7)
    assert held_out_after > held_out_before + 2.0, (held_out_before, held_out_after)


def test_the_sft_loss_is_the_token_mean_nll_of_the_trained_tokens(tokenizer: Any) -> None:
    model, _ = load_policy("tiny", device="cpu")
    backend = EmbeddedBackend(model, OptimizerConfig(lr=1e-9), AlgorithmConfig(estimator="sft"))
    batch = traces_batch(tokenizer, TRAIN_WORDS[:3])
    expected = -mean_trained_logprob(model, batch)
    assert backend.step(batch)["loss"] == pytest.approx(expected, rel=1e-4)


def test_a_policy_gradient_step_refuses_rendered_rows_naming_the_setting(tokenizer: Any) -> None:
    model, _ = load_policy("tiny", device="cpu")
    backend = EmbeddedBackend(model, OptimizerConfig(), AlgorithmConfig(estimator="grpo"))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with pytest.raises(RenderedRowsError, match=r"algorithm\.rendered_rows: drop .* or recompute"):
        backend.step(traces_batch(tokenizer, TRAIN_WORDS[:4]))
    assert all(torch.equal(before[n], p) for n, p in model.named_parameters())


def test_drop_leaves_only_the_exact_rows_for_a_policy_gradient_step(tokenizer: Any) -> None:
    pad = SampleConfig(pad_token_id=int(tokenizer.pad_token_id or 0))
    mixed = [rendered_trace(tokenizer, "apple"), rendered_trace(tokenizer, "river", rendered=False)]
    batch, _ = build_samples(mixed, pad)
    kept, metrics = rows_for_step(batch, AlgorithmConfig(rendered_rows="drop"))
    assert kept.num_rows == 1 and kept.row_rendered.tolist() == [False]
    assert [batch.rollout_ids[u] for u in kept.row_rollout.tolist()] == ["river"]
    assert metrics["samples/rendered_dropped"] == 1


def test_recompute_takes_pi_old_from_the_current_policy(tokenizer: Any) -> None:
    model, _ = load_policy("tiny", device="cpu")
    words = TRAIN_WORDS[:4]
    batch = traces_batch(tokenizer, words)
    groups = torch.tensor([0, 0, 1, 1])  # two groups of two, rewards 1 / 0 in each: a signal to follow
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0])
    batch.rollout_group, batch.row_group, batch.rollout_reward, batch.row_reward = groups, groups, rewards, rewards
    backend = EmbeddedBackend(model, OptimizerConfig(lr=1e-3), AlgorithmConfig(rendered_rows="recompute"))
    metrics = backend.step(batch)
    # against the recorded 0s the ratio would be exp(logp) << 1; against the current policy it starts at 1
    assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-4)


def test_the_verl_seams_sft_loss_matches_the_embedded_one_without_verl(tokenizer: Any) -> None:
    """verl's workers call the registered `alight_sft` loss with its own convention (R, A response columns);
    it must give `sft_loss`'s number. verl itself does not run here: tests marked verl check the registry."""
    batch = traces_batch(tokenizer, TRAIN_WORDS[:3])
    logp = torch.randn(batch.loss_mask.shape) - 2
    weights = aggregation_weights(batch.loss_mask, batch.row_rollout, "token_mean")
    loss, metrics = alight_sft_loss(
        batch.old_logprobs, logp, torch.zeros_like(logp), batch.loss_mask, rollout_is_weights=weights
    )
    expected = -float((logp * batch.loss_mask).sum() / batch.loss_mask.sum())
    assert float(loss) == pytest.approx(expected, rel=1e-6)
    assert metrics["actor/alight_tokens"] == float(batch.loss_mask.sum())
