"""SampleBatch -> verl DataProto on a real sample batch: the recorded ids, masks and logprobs, nothing retokenized."""

from __future__ import annotations

import pytest
import torch
from verl_fixtures import real_batch, require_verl

from alight_server.trainer.step.algorithm import group_advantages

pytestmark = pytest.mark.verl
require_verl()

from alight_server.trainer.backends.verl.data import RowKey, to_data_proto  # noqa: E402
from alight_server.trainer.backends.verl.registry import register, with_advantages  # noqa: E402

PAD = 0


@pytest.fixture(scope="module")
def batch():
    return real_batch()


@pytest.fixture(scope="module")
def data(batch):
    return to_data_proto(batch, pad_token_id=PAD)


def real(batch, r: int, name: str) -> list:
    """Row r of a SampleBatch tensor over its real tokens."""
    n = int(batch.attention_mask[r].sum())
    return getattr(batch, name)[r, :n].tolist()


def test_prompt_then_response_are_exactly_the_recorded_ids_of_each_row(batch, data):
    prompt_width = data.batch["prompts"].shape[1]
    for r in range(batch.num_rows):
        attention = data.batch["attention_mask"][r].bool()
        ids = data.batch["input_ids"][r][attention].tolist()
        assert ids == real(batch, r, "input_ids")
        assert torch.equal(
            data.batch["input_ids"][r], torch.cat([data.batch["prompts"][r], data.batch["responses"][r]])
        )
        # the response starts at the row's first trained token
        first_trained = real(batch, r, "loss_mask").index(1.0)
        assert data.batch["input_ids"][r, prompt_width].item() == real(batch, r, "input_ids")[first_trained]


def test_prompts_are_left_padded_and_responses_right_padded(data):
    attention = data.batch["attention_mask"]
    prompt_width = data.batch["prompts"].shape[1]
    prompt, response = attention[:, :prompt_width], attention[:, prompt_width:]
    assert torch.equal(prompt, prompt.sort(dim=1).values)  # 0...0 1...1
    assert torch.equal(response, response.sort(dim=1, descending=True).values)  # 1...1 0...0
    assert (data.batch["input_ids"][attention == 0] == PAD).all()


def test_position_ids_count_the_real_tokens_from_zero(batch, data):
    for r in range(batch.num_rows):
        attention = data.batch["attention_mask"][r].bool()
        positions = data.batch["position_ids"][r][attention].tolist()
        assert positions == list(range(int(attention.sum())))


def test_response_mask_is_the_loss_mask_with_tool_results_left_untrained(batch, data):
    prompt_width = data.batch["prompts"].shape[1]
    for r in range(batch.num_rows):
        attention = data.batch["attention_mask"][r].bool()
        mask = torch.cat([torch.zeros(prompt_width, dtype=torch.int64), data.batch["response_mask"][r]])
        assert mask[attention].tolist() == [int(x) for x in real(batch, r, "loss_mask")]
    # row 0 merges two calls around a tool result: [10, 11] trained, [20, 21] not, [12, 13, 14] trained
    assert data.batch["responses"][0, :7].tolist() == [10, 11, 20, 21, 12, 13, 14]
    assert data.batch["response_mask"][0, :7].tolist() == [1, 1, 0, 0, 1, 1, 1]


def test_old_and_rollout_log_probs_are_the_gateway_logprobs(batch, data):
    prompt_width = data.batch["prompts"].shape[1]
    for key in ("old_log_probs", "rollout_log_probs"):
        for r in range(batch.num_rows):
            attention = data.batch["attention_mask"][r].bool()
            full = torch.cat([torch.zeros(prompt_width), data.batch[key][r]])
            assert full[attention].tolist() == real(batch, r, "old_logprobs")
    # call 1 of rollout a1, tokens 0..2: logprobs_for(1, 3) = -1.0, -1.01, -1.02 (float32)
    assert data.batch["old_log_probs"][0, 4:7].tolist() == pytest.approx([-1.0, -1.01, -1.02], abs=1e-6)


def test_uid_names_each_rows_group_and_rollout_and_the_groups_rowless_rewards(batch, data):
    keys = list(data.non_tensor_batch["uid"])
    assert keys[:4] == [
        RowKey("g1", "a1", (0.25,)),
        RowKey("g1", "a2", (0.25,)),
        RowKey("g1", "a2", (0.25,)),
        RowKey("g1", "a3", (0.25,)),
    ]
    assert keys[4:] == [RowKey("g2", "b1"), RowKey("g2", "b2"), RowKey("g2", "b2")]


def test_rollout_advantages_are_broadcast_to_every_trained_token_of_its_rows(batch, data):
    register()
    with_advantages(data, "grpo")
    expected = group_advantages(batch.rollout_reward, batch.rollout_group)  # (U,) a4 included in g1's statistics
    advantages, mask = data.batch["advantages"], data.batch["response_mask"]
    for r in range(batch.num_rows):
        rollout = int(batch.row_rollout[r])
        assert advantages[r][mask[r] == 1].tolist() == pytest.approx([float(expected[rollout])] * int(mask[r].sum()))
        assert (advantages[r][mask[r] == 0] == 0).all()
    # a2's two rows (a history rewrite) carry a2's one advantage; a4 (no row) moved g1's mean
    assert advantages[1][mask[1] == 1].unique().tolist() == advantages[2][mask[2] == 1].tolist()
    without_a4 = group_advantages(batch.rollout_reward[[0, 1, 2]], batch.rollout_group[[0, 1, 2]])
    assert float(advantages[1][mask[1] == 1][0]) != pytest.approx(float(without_a4[1]))


def test_each_row_carries_its_rollouts_reward_once_on_its_last_trained_token(batch, data):
    rewards, mask = data.batch["token_level_rewards"], data.batch["response_mask"]
    assert rewards.sum(1).tolist() == batch.row_reward.tolist()
    for r in range(batch.num_rows):
        last = int(mask[r].nonzero().max())
        assert rewards[r].nonzero().flatten().tolist() in ([last], [])  # [] where the reward is 0
