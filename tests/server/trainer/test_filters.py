"""The trajectory filter before training: gate-flagged, broken-capture and infra rollouts are left out, counted."""

from __future__ import annotations

from samples_fixtures import model_call, trajectory

from alight.schemas import FailureKind
from alight_server.trainer.filters import drop_reason, prefix_breaks

CUT = {"choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "..."}}]}


def test_a_conversation_that_extends_its_history_has_no_prefix_break() -> None:
    calls = [model_call(0, [1, 2], [3]), model_call(1, [1, 2, 3, 9], [4]), model_call(2, [1, 2, 3, 9, 4, 8], [5])]
    assert prefix_breaks(trajectory(calls)) == 0
    assert drop_reason(trajectory(calls), flagged=set()) is None


def test_rollouts_with_rewritten_histories_are_dropped_past_the_threshold() -> None:
    calls = [model_call(i, [7, i], [3]) for i in range(4)]  # every prompt starts over
    assert prefix_breaks(trajectory(calls)) == 3
    assert drop_reason(trajectory(calls), flagged=set(), max_prefix_breaks=2) == "prefix_breaks"
    assert drop_reason(trajectory(calls), flagged=set()) is None  # off unless the config sets a threshold


def test_a_rollout_a_gate_flagged_is_dropped_whatever_its_reward() -> None:
    assert drop_reason(trajectory([model_call(0, [1], [2])], reward=1.0), flagged={"r1"}) == "gate_flagged"


def test_rollouts_mostly_cut_at_max_tokens_and_infra_failures_are_dropped() -> None:
    cut = [model_call(0, [1], [2], response_body=CUT), model_call(1, [1, 2], [3], response_body=CUT)]
    assert drop_reason(trajectory(cut), flagged=set(), max_truncated_share=0.5) == "truncated"
    assert drop_reason(trajectory(cut), flagged=set()) is None
    infra = trajectory([model_call(0, [1], [2])], reward=None, failure_kind=FailureKind.INFRA)
    assert drop_reason(infra, flagged=set()) == "infra"
