"""Capture helpers as pure functions: token ids, logprobs, flags, traceparent, the ModelCall row."""

from __future__ import annotations

from alight.schemas import ApiFlavour, ModelCall
from alight_server.gateway.capture.record import (
    LOGPROB_COUNT_MISMATCH,
    MISSING_PROMPT_IDS,
    MISSING_TOKEN_IDS,
    USAGE_COUNT_MISMATCH,
    CallRecord,
    parse_traceparent,
    tokens_of,
)


def _chat(ids, logprobs, prompt=(1, 2), usage=None):
    content = None if logprobs is None else [{"token": "t", "logprob": lp} for lp in logprobs]
    out = {
        "choices": [{"index": 0, "token_ids": ids, "logprobs": None if content is None else {"content": content}}],
        "prompt_token_ids": list(prompt) if prompt is not None else None,
    }
    if usage is not None:
        out["usage"] = {"completion_tokens": usage}
    return out


def test_clean_response_has_no_flags():
    t = tokens_of(_chat([5, 6], [-0.1, -0.2], usage=2), chat=True)
    assert (t.prompt_token_ids, t.response_token_ids, t.response_logprobs, t.flags) == (
        [1, 2],
        [5, 6],
        [-0.1, -0.2],
        [],
    )


def test_logprob_count_that_differs_from_token_count_is_flagged():
    assert tokens_of(_chat([5, 6], [-0.1]), chat=True).flags == [LOGPROB_COUNT_MISMATCH]


def test_upstream_without_token_ids_is_flagged_not_guessed():
    t = tokens_of(_chat(None, [-0.1], prompt=None), chat=True)
    assert t.response_token_ids == [] and t.flags == [MISSING_PROMPT_IDS, MISSING_TOKEN_IDS]


def test_usage_that_disagrees_with_token_ids_is_flagged():
    assert tokens_of(_chat([5, 6], [-0.1, -0.2], usage=3), chat=True).flags == [USAGE_COUNT_MISMATCH]


def test_completions_take_prompt_ids_from_the_choice():
    resp = {
        "choices": [{"index": 0, "token_ids": [7], "prompt_token_ids": [3], "logprobs": {"token_logprobs": [-1.0]}}]
    }
    t = tokens_of(resp, chat=False)
    assert (t.prompt_token_ids, t.response_token_ids, t.response_logprobs) == ([3], [7], [-1.0])


def test_traceparent_parsing():
    trace, span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    assert parse_traceparent(f"00-{trace}-{span}-01") == (trace, span)
    assert parse_traceparent(f"00-{trace.upper()}-{span}-00") == (trace, span)
    assert parse_traceparent("00-" + "0" * 32 + f"-{span}-01") == (None, None)
    assert parse_traceparent("garbage") == (None, None)
    assert parse_traceparent(None) == (None, None)


def test_a_recorded_call_is_a_valid_model_call_carrying_the_record_and_its_tokens():
    record = CallRecord(
        rollout_id="r1",
        attempt=2,
        flavour=ApiFlavour.CHAT,
        request={"messages": [{"role": "user", "content": "hi"}]},
        trace_id="a" * 32,
        span_id="b" * 16,
        streamed=True,
        policy_version=3,
        started=0.0,
        upstream="u1",
    )
    tokens = tokens_of(_chat([5, 6], [-0.1, -0.2], usage=2), chat=True)
    call = record.to_model_call(status=200, latency_ms=1.5, response={"id": "x"}, tokens=tokens)
    # Validation is skipped when the row is built; a round trip through it shows no field was left unset.
    assert ModelCall.model_validate(call.model_dump()) == call
    assert call.model_dump(include={"rollout_id", "attempt", "flavour", "trace_id", "span_id", "upstream"}) == {
        "rollout_id": "r1",
        "attempt": 2,
        "flavour": ApiFlavour.CHAT,
        "trace_id": "a" * 32,
        "span_id": "b" * 16,
        "upstream": "u1",
    }
    assert (call.streamed, call.policy_version, call.request, call.status_code, call.latency_ms) == (
        True,
        3,
        record.request,
        200,
        1.5,
    )
    assert (call.prompt_token_ids, call.response_token_ids, call.response_logprobs, call.flags) == (
        [1, 2],
        [5, 6],
        [-0.1, -0.2],
        [],
    )
