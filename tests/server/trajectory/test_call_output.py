"""CallOutput: one model call's answer as text, tool calls and finish reason, from every API flavour's shape."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from alight.schemas import ApiFlavour, CallOutput, ModelCall, ToolCallView
from alight_server.trajectories.call_output import call_output

ADD = ToolCallView(id="c1", name="add", arguments='{"a": 1}')
RESPONSES: dict[ApiFlavour, dict[str, Any]] = {
    ApiFlavour.CHAT: {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": "it is 42",
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ]
    },
    ApiFlavour.RESPONSES: {
        "status": "completed",
        "output": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "it is 42"}]},
            {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a": 1}'},
        ],
    },
    ApiFlavour.MESSAGES: {
        "content": [
            {"type": "text", "text": "it is 42"},
            {"type": "tool_use", "id": "c1", "name": "add", "input": '{"a": 1}'},
        ],
        "stop_reason": "tool_use",
    },
}


def recorded(flavour: ApiFlavour, response: dict[str, Any] | None) -> ModelCall:
    return ModelCall(
        id="m", rollout_id="r", attempt=1, seq=0, flavour=flavour, request={}, response=response,
        status_code=200, created_at=datetime.now(UTC),
    )  # fmt: skip


@pytest.mark.parametrize("flavour", list(RESPONSES))
def test_every_chat_like_flavour_reads_as_the_same_text_tool_calls_and_finish_reason(flavour: ApiFlavour) -> None:
    assert call_output(recorded(flavour, RESPONSES[flavour])) == CallOutput(
        text="it is 42", tool_calls=[ADD], finish_reason="tool_calls"
    )


def test_a_completions_answer_reads_as_its_text() -> None:
    response = {"choices": [{"text": "it is 42", "finish_reason": "length"}]}
    assert call_output(recorded(ApiFlavour.COMPLETIONS, response)) == CallOutput(
        text="it is 42", finish_reason="length"
    )


def test_an_incomplete_responses_answer_finishes_with_length() -> None:
    response = {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": []}
    assert call_output(recorded(ApiFlavour.RESPONSES, response)).finish_reason == "length"


@pytest.mark.parametrize("flavour", list(ApiFlavour))
@pytest.mark.parametrize("response", [None, {}, {"choices": "x", "output": 3, "content": None}])
def test_a_failed_or_malformed_response_reads_as_empty(flavour: ApiFlavour, response: dict[str, Any] | None) -> None:
    assert call_output(recorded(flavour, response)) == CallOutput()
