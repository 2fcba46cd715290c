"""The trajectory filter before training: gate-flagged, broken-capture and infra rollouts are left out, counted.

A prefix break is one fact: the filter's `samples.max_prefix_breaks` counts the breaks the sample builder
reports for the same attempt under the same settings, never a rule of its own.
"""

from __future__ import annotations

import pytest
from samples_fixtures import chat, model_call, trajectory

from alight.schemas import REVIEW_FLAG, REWARD_HACKING, ApiFlavour, FailureKind, GateFlag, Trajectory, TrajectoryCall
from alight_server.trainer.step.filters import drop_reason
from alight_server.trainer.step.samples import SampleConfig, build_samples
from alight_server.trainer.step.samples.build import prefix_breaks

CUT = {"choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "..."}}]}
# The same cut as the other flavours record it: Anthropic Messages (Claude Code) and Responses (Codex).
CUT_MESSAGES = {"type": "message", "content": [{"type": "text", "text": "..."}], "stop_reason": "max_tokens"}
CUT_RESPONSES = {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": []}
DEFAULTS = SampleConfig()
MAIN = {"model": "claude-opus-4-8", "messages": []}
SIDE = {"model": "claude-haiku-4-5", "messages": []}  # Claude Code titling the session


def test_a_conversation_that_extends_its_history_has_no_prefix_break() -> None:
    calls = [model_call(0, [1, 2], [3]), model_call(1, [1, 2, 3, 9], [4]), model_call(2, [1, 2, 3, 9, 4, 8], [5])]
    assert prefix_breaks(trajectory(calls), DEFAULTS) == 0
    assert drop_reason(trajectory(calls), SampleConfig(max_prefix_breaks=0)) is None


def test_rollouts_with_rewritten_histories_are_dropped_past_the_threshold() -> None:
    calls = [model_call(i, [7, i], [3]) for i in range(4)]  # every prompt starts over
    assert prefix_breaks(trajectory(calls), DEFAULTS) == 3
    assert drop_reason(trajectory(calls), SampleConfig(max_prefix_breaks=2)) == "prefix_breaks"
    assert drop_reason(trajectory(calls), DEFAULTS) is None  # off unless the config sets a threshold


def test_a_retried_call_is_not_a_prefix_break() -> None:
    calls = [model_call(0, [1, 2], [3]), model_call(1, [1, 2], [4]), model_call(2, [1, 2, 4, 9], [5])]
    assert drop_reason(trajectory(calls), SampleConfig(max_prefix_breaks=0)) is None


def test_a_sub_agent_interleaving_its_calls_is_not_a_prefix_break() -> None:
    planner, helper = chat(("system", "You plan."), ("user", "2+3?")), chat(("system", "You add."), ("user", "2+3"))
    calls = [
        model_call(0, [1, 2], [10], messages=planner),
        model_call(1, [5, 6], [50], messages=helper),
        model_call(2, [1, 2, 10, 20], [11]),
        model_call(3, [5, 6, 50, 60], [51]),
    ]
    assert drop_reason(trajectory(calls), SampleConfig(max_prefix_breaks=0)) is None


def test_a_side_model_call_the_run_excludes_is_not_a_prefix_break() -> None:
    calls = [
        model_call(0, [1, 2], [10], request=MAIN),
        model_call(1, [7, 8], [70], request=SIDE),
        model_call(2, [1, 2, 10, 20], [11], request=MAIN),
    ]
    excluding = SampleConfig(exclude_models=["*haiku*"])
    assert drop_reason(trajectory(calls), excluding.model_copy(update={"max_prefix_breaks": 0})) is None


def _shapes() -> dict[str, Trajectory]:
    """Attempts the filter and the builder once counted differently, and ones they always agreed on."""
    rewrite = chat(("system", "s"), ("user", "task"), ("assistant", "a"), ("user", "summary of it"))
    return {
        "extends": trajectory([model_call(0, [1, 2], [3]), model_call(1, [1, 2, 3, 9], [4])]),
        "retry": trajectory([model_call(0, [1, 2], [3]), model_call(1, [1, 2], [4]), model_call(2, [1, 2, 4], [5])]),
        "rewrite": trajectory(
            [
                model_call(0, [1, 2], [3], messages=chat(("system", "s"), ("user", "task"))),
                model_call(1, [1, 9], [4], messages=rewrite),
            ]
        ),
        "restart": trajectory([model_call(i, [7, i], [3]) for i in range(4)]),
        "side model": trajectory(
            [
                model_call(0, [1, 2], [10], request=MAIN),
                model_call(1, [7, 8], [70], request=SIDE),
                model_call(2, [1, 2, 10, 20], [11], request=MAIN),
            ]
        ),
        "other agent": trajectory(
            [
                TrajectoryCall(call=model_call(0, [1, 2], [10]), agent_name="solver"),
                TrajectoryCall(call=model_call(1, [4], [40]), agent_name="critic"),
                TrajectoryCall(call=model_call(2, [1, 2, 10, 20], [11]), agent_name="solver"),
                TrajectoryCall(call=model_call(3, [4, 40, 41, 9], [42]), agent_name="critic"),
            ]
        ),
    }


CONFIGS = {
    "defaults": DEFAULTS,
    "excluding haiku": SampleConfig(exclude_models=["*haiku*"]),
    "solver only": SampleConfig(agents=["solver"]),
    "transition": SampleConfig(mode="transition"),
}


@pytest.mark.parametrize("config_name", CONFIGS)
@pytest.mark.parametrize("shape", _shapes())
def test_the_filter_counts_exactly_the_breaks_the_sample_builder_reports(shape: str, config_name: str) -> None:
    attempt, config = _shapes()[shape], CONFIGS[config_name]
    _, report = build_samples([attempt], config)
    counted = prefix_breaks(attempt, config)
    assert counted == report.total_breaks
    assert drop_reason(attempt, config.model_copy(update={"max_prefix_breaks": counted})) is None
    if counted:
        assert drop_reason(attempt, config.model_copy(update={"max_prefix_breaks": counted - 1})) == "prefix_breaks"


def test_a_rollout_a_gate_flagged_is_dropped_whatever_its_reward() -> None:
    flagged = trajectory([model_call(0, [1], [2])], reward=1.0)
    flagged.gate_flags = [GateFlag(kind=REWARD_HACKING, rule="test_file_modified", attempt=1)]
    assert drop_reason(flagged, DEFAULTS) == "gate_flagged"
    flagged.gate_flags = [GateFlag(kind=REVIEW_FLAG, rule="long_answer", attempt=1)]  # a person looks; reward kept
    assert drop_reason(flagged, DEFAULTS) is None


def test_rollouts_mostly_cut_at_max_tokens_and_infra_failures_are_dropped() -> None:
    cut = [model_call(0, [1], [2], response_body=CUT), model_call(1, [1, 2], [3], response_body=CUT)]
    assert drop_reason(trajectory(cut), SampleConfig(max_truncated_share=0.5)) == "truncated"
    assert drop_reason(trajectory(cut), DEFAULTS) is None
    infra = trajectory([model_call(0, [1], [2])], reward=None, failure_kind=FailureKind.INFRA)
    assert drop_reason(infra, DEFAULTS) == "infra"


@pytest.mark.parametrize(
    ("flavour", "body"), [(ApiFlavour.MESSAGES, CUT_MESSAGES), (ApiFlavour.RESPONSES, CUT_RESPONSES)]
)
def test_calls_cut_at_their_limit_count_as_truncated_in_every_flavour(flavour: ApiFlavour, body: dict) -> None:
    cut = [model_call(i, [1] * (i + 1), [2], flavour=flavour, request={}, response_body=body) for i in range(2)]
    assert drop_reason(trajectory(cut), SampleConfig(max_truncated_share=0.5)) == "truncated"
