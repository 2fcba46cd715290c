"""A reasoning policy's thoughts reach Anthropic clients as thinking blocks and Responses clients as reasoning items.

The upstream is the vLLM-shaped double in its two reasoning modes: `<think>...</think>` at the start
of the content (a server without a reasoning parser) and the `reasoning` field (with one). Whatever
the presentation, the recorded token ids are the upstream's own, thought included.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from alight.schemas import RolloutCreate, UpstreamCreate
from alight_server.gateway.flavours.reasoning import ThinkSplitter, split_message
from alight_server.http.auth import issue_attempt_token
from alight_server.stacks.server_thread import ServerThread
from alight_testing import FakeUpstreamState, create_fake_upstream


@dataclass
class Attempt:
    rollout_id: str
    token: str
    base_url: str  # OPENAI_BASE_URL

    @property
    def anthropic_base_url(self) -> str:
        return self.base_url.removesuffix("/v1")


@dataclass
class Thinker:
    log: FakeUpstreamState
    server: Any  # the live alight server (tests/conftest.py)

    def start_attempt(self) -> Attempt:
        store = self.server.store
        [rollout] = store.create_rollouts([RolloutCreate(task={})])
        [(r, a)] = store.claim_attempts(limit=1, ids=[rollout.id])
        token = issue_attempt_token(self.server.app.state.token_secret, r.id, a, ttl_s=3600)
        return Attempt(r.id, token, f"{self.server.url}/gw/{r.id}/{a}/v1")


@pytest.fixture(scope="module", params=["tags", "field"])
def thinking_upstream(request: pytest.FixtureRequest) -> Iterator[tuple[str, FakeUpstreamState]]:
    app = create_fake_upstream(model="thinker", reasoning=request.param)
    with ServerThread(app) as url:
        yield url + "/v1", app.state.fake


@pytest.fixture
def gw(live_server: Any, thinking_upstream: tuple[str, FakeUpstreamState]) -> Thinker:
    url, log = thinking_upstream
    log.calls.clear()
    live_server.store.add_upstream(UpstreamCreate(id="thinker", url=url, model="thinker"))
    return Thinker(log, live_server)


@pytest.fixture
def thinker(gw: Thinker) -> Thinker:
    return gw


def _thought(log: FakeUpstreamState) -> tuple[str, str, list[int]]:
    """(thought, answer, token ids) of the upstream's last reply."""
    choice = log.calls[-1].response["choices"][0]  # type: ignore[index]
    reasoning, text = split_message(choice["message"])
    return reasoning, text, choice["token_ids"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_messages_answer_starts_with_a_thinking_block(gw, thinker, stream):
    attempt = gw.start_attempt()
    client = anthropic.Anthropic(base_url=attempt.anthropic_base_url, api_key=attempt.token, max_retries=0)
    request = {"model": "claude", "max_tokens": 64, "messages": [{"role": "user", "content": "Why is the sky blue?"}]}
    if stream:
        with client.messages.stream(**request) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**request)
    thought, answer, token_ids = _thought(thinker.log)
    assert thought and answer
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[0].thinking == thought and message.content[1].text == answer  # type: ignore[union-attr]
    [call] = gw.server.store.list_model_calls(attempt.rollout_id)
    assert call.response_token_ids == token_ids  # the thought's tokens too: nothing re-tokenized or cut


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_responses_output_starts_with_a_reasoning_item(gw, thinker, stream):
    attempt = gw.start_attempt()
    client = openai.OpenAI(base_url=attempt.base_url, api_key=attempt.token, max_retries=0)
    if stream:
        with client.responses.stream(model="gpt", input="Why is the sky blue?") as events:
            deltas = [e.delta for e in events if e.type == "response.reasoning_text.delta"]
            response = events.get_final_response()
    else:
        response = client.responses.create(model="gpt", input="Why is the sky blue?")
        deltas = None
    thought, answer, token_ids = _thought(thinker.log)
    reasoning, message = response.output
    assert reasoning.type == "reasoning" and reasoning.content is not None
    assert reasoning.content[0].text == thought and response.output_text == answer
    assert message.type == "message"
    if deltas is not None:
        assert "".join(deltas) == thought
    [call] = gw.server.store.list_model_calls(attempt.rollout_id)
    assert call.response_token_ids == token_ids


def test_a_thinking_block_sent_back_reaches_the_policy_as_the_turns_reasoning(gw, thinker):
    attempt = gw.start_attempt()
    client = anthropic.Anthropic(base_url=attempt.anthropic_base_url, api_key=attempt.token, max_retries=0)
    first = client.messages.create(model="c", max_tokens=64, messages=[{"role": "user", "content": "Hi"}])
    history = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {"role": "user", "content": "And then?"},
    ]
    client.messages.create(model="c", max_tokens=64, messages=history)  # type: ignore[arg-type]
    assistant = thinker.log.calls[-1].request["messages"][1]
    assert assistant["reasoning_content"] == first.content[0].thinking  # type: ignore[union-attr]


@given(
    thought=st.text(alphabet="ab <>/\n", max_size=20),
    answer=st.text(alphabet="ab <>/\n", max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=60), max_size=6),
)
def test_think_tags_split_the_same_however_the_stream_is_cut(thought, answer, cuts):
    text = f"<think>{thought}</think>{answer}"
    whole = split_message({"content": text})
    splitter = ThinkSplitter()
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    pieces = []
    for a, b in itertools.pairwise(bounds):
        pieces += splitter.feed({"content": text[a:b]})
    pieces += splitter.flush()
    streamed = (
        "".join(t for k, t in pieces if k == "reasoning"),
        "".join(t for k, t in pieces if k == "text"),
    )
    assert streamed == whole
    if "</think>" not in thought:
        assert whole[0] == thought


def test_content_without_a_leading_think_tag_is_all_answer():
    assert split_message({"content": "plain <think>not a thought</think>"}) == (
        "",
        "plain <think>not a thought</think>",
    )
