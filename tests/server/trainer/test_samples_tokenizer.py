"""Sample builder on ids from a real tokenizer and chat template (alight's built-in `tiny` model)."""

from __future__ import annotations

import pytest
from samples_fixtures import model_call, trajectory

from alight_server.trainer.step.samples import build_samples

SYSTEM = {"role": "system", "content": "You add."}
USER = {"role": "user", "content": "2+3?"}
# What a tool parser hands the agent for a compact `{"name":"add","arguments":{"a":2,"b":3}}` completion.
TOOL_CALL_MESSAGE = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}],
}
TOOL_RESULT = {"role": "tool", "tool_call_id": "c1", "content": "5"}


@pytest.fixture(scope="module")
def tokenizer():
    transformers = pytest.importorskip("transformers")
    from alight_server.inference.models import resolve_model

    return transformers.AutoTokenizer.from_pretrained(str(resolve_model("tiny")))


def render(tokenizer, messages):
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def generated(tokenizer, text):
    """What the model produced: the text's ids and the end-of-turn token."""
    return [*tokenizer.encode(text), tokenizer.convert_tokens_to_ids("<|im_end|>")]


def chat_call(seq, prompt, response, messages, reply):
    body = {"choices": [{"index": 0, "message": reply}]}
    return model_call(seq, prompt, response, messages=messages, response_body=body)


def hello_then_again(tokenizer, first_prompt, answer):
    """Two calls: the model answers "Hello" with the ids `answer`, then the user says "again"."""
    reply = {"role": "assistant", "content": "Hello"}
    second_messages = [SYSTEM, USER, reply, {"role": "user", "content": "again"}]
    return [
        chat_call(0, first_prompt, answer, [SYSTEM, USER], reply),
        chat_call(1, render(tokenizer, second_messages), generated(tokenizer, "5"), second_messages, reply),
    ]


def test_turns_rendered_by_the_chat_template_merge_into_one_row(tokenizer):
    first_prompt = render(tokenizer, [SYSTEM, USER])
    answer = generated(tokenizer, "Hello")
    calls = hello_then_again(tokenizer, first_prompt, answer)
    batch, report = build_samples([trajectory(calls)], decode=tokenizer.decode)
    assert (report.rows, report.total_breaks) == (1, 0)
    start = len(first_prompt)
    assert batch.input_ids[0, start : start + len(answer)].tolist() == answer
    assert batch.loss_mask[0, start : start + len(answer)].tolist() == [1.0] * len(answer)


def test_text_generated_in_other_pieces_than_the_tokenizer_makes_is_retokenization(tokenizer):
    first_prompt = render(tokenizer, [SYSTEM, USER])
    # The model sampled "Hello" as "Hel" + "lo"; the template re-encodes it as the tokenizer would.
    answer = tokenizer.encode("Hel") + tokenizer.encode("lo") + [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    assert answer != generated(tokenizer, "Hello")
    calls = hello_then_again(tokenizer, first_prompt, answer)
    batch, report = build_samples([trajectory(calls)], decode=tokenizer.decode)
    assert report.breaks == {"retokenization": 1}
    assert report.break_examples[0].position == len(first_prompt) + 1  # "H" agrees, then "el" vs "ello"
    assert batch.row_calls == [(0,), (1,)]


def test_a_tool_call_rendered_back_in_another_layout_is_template_drift(tokenizer):
    first_prompt = render(tokenizer, [SYSTEM, USER])
    answer = generated(tokenizer, '<tool_call>\n{"name":"add","arguments":{"a":2,"b":3}}\n</tool_call>')
    second_messages = [SYSTEM, USER, TOOL_CALL_MESSAGE, TOOL_RESULT]
    calls = [
        chat_call(0, first_prompt, answer, [SYSTEM, USER], TOOL_CALL_MESSAGE),
        chat_call(1, render(tokenizer, second_messages), generated(tokenizer, "5"), second_messages, USER),
    ]
    _, report = build_samples([trajectory(calls)], decode=tokenizer.decode)
    assert report.breaks == {"template_drift": 1}
