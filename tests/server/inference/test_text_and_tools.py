"""Pure pieces: Hermes tool-call parsing with its plain-content fallback, and stop-string-safe streaming."""

from __future__ import annotations

import json

from alight_server.inference.detokenize import IncrementalText
from alight_server.inference.engine import InferenceEngine
from alight_server.inference.tool_calls import ToolCallStream, parse_tool_calls


def test_hermes_tool_calls_become_openai_tool_calls() -> None:
    text = 'Let me check.\n<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n<tool_call>{"name": "b", "arguments": {}}</tool_call>'
    content, calls = parse_tool_calls(text)
    assert content == "Let me check."
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("a", {"x": 1}),
        ("b", {}),
    ]
    assert len({c["id"] for c in calls}) == 2


def test_an_unclosed_final_call_is_still_parsed() -> None:
    _, calls = parse_tool_calls('<tool_call>\n{"name": "a", "arguments": {"q": "z"}}\n')
    assert calls[0]["function"]["name"] == "a"


def test_malformed_json_falls_back_to_plain_content() -> None:
    text = '<tool_call>\n{"name": "a", "arguments": {oops}\n</tool_call>'
    assert parse_tool_calls(text) == (text, [])


def test_a_call_without_a_name_falls_back_to_plain_content() -> None:
    text = '<tool_call>{"arguments": {}}</tool_call>'
    assert parse_tool_calls(text) == (text, [])


def test_tool_call_stream_holds_back_a_forming_tag_and_releases_it_if_no_call_follows() -> None:
    stream = ToolCallStream()
    assert stream.push("Hello <tool") == "Hello "
    assert stream.push("box") == "<toolbox"
    assert stream.push(" <tool_call>{bad") == " "
    assert stream.finish() == ("<tool_call>{bad", [])


def test_stop_strings_are_never_streamed(engine: InferenceEngine) -> None:
    tokenizer = engine.tokenizer
    ids = tokenizer("The answer is 42. Thank you", add_special_tokens=False)["input_ids"]
    text = IncrementalText(tokenizer, stop=["42."])
    streamed = ""
    for token in ids:
        streamed += text.push(token)
        if text.stopped:
            break
    assert text.stopped and streamed == "The answer is "
