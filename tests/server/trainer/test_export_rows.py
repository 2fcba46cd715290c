"""`alight data export`'s rows from the real sample builder: each generated token's policy version, by its call."""

from __future__ import annotations

from samples_fixtures import model_call, trajectory

from alight_server.commands.export_format import row_lines
from alight_server.trainer.step.samples import SampleConfig, build_samples

# Two turns of one conversation: the second prompt extends the first prompt and answer with a tool result.
FIRST = model_call(0, [1, 2, 3], [4, 5], policy_version=3)
SECOND = model_call(1, [1, 2, 3, 4, 5, 6, 7], [8, 9, 10], policy_version=4)


def test_a_merged_row_gives_each_generated_token_the_version_of_its_call_and_context_minus_one() -> None:
    merged = trajectory([FIRST, SECOND])
    batch, _ = build_samples([merged])
    (row,) = row_lines(batch, merged)
    assert row["input_ids"] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert row["loss_mask"] == [0, 0, 0, 1, 1, 0, 0, 1, 1, 1]
    assert row["policy_versions"] == [-1, -1, -1, 3, 3, -1, -1, 4, 4, 4]
    assert row["calls"] == [0, 1]


def test_a_row_cut_at_max_response_tokens_keeps_its_versions_aligned() -> None:
    merged = trajectory([FIRST, SECOND])
    batch, _ = build_samples([merged], SampleConfig(max_response_tokens=5))
    (row,) = row_lines(batch, merged)
    assert row["input_ids"] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert row["policy_versions"] == [-1, -1, -1, 3, 3, -1, -1, 4]
