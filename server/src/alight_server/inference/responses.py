"""OpenAI response bodies and server-sent event streams, built from an inference engine's token events."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import Request

from alight_server.gateway.reply import until_disconnect
from alight_server.inference.generation import TokenEvent
from alight_server.inference.logprobs import LogprobFormatter
from alight_server.inference.protocol import ChatCompletionRequest, CompletionRequest
from alight_server.inference.tool_calls import ToolCallStream, parse_tool_calls


def _sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


async def _prepend(first: TokenEvent, rest: AsyncIterator[TokenEvent]) -> AsyncIterator[TokenEvent]:
    yield first
    async for event in rest:
        yield event


async def closing(body: AsyncIterator[str], events: AsyncGenerator[TokenEvent, None]) -> AsyncIterator[str]:
    """Stream `body`; when it ends or the client goes away, close `events`, which cancels the request's choices."""
    try:
        async for chunk in body:
            yield chunk
    finally:
        await events.aclose()


async def collect(
    first: TokenEvent, events: AsyncGenerator[TokenEvent, None], n: int, request: Request
) -> list[list[TokenEvent]]:
    """Every choice's events; a client that goes away first cancels them (ClientGone), as a left stream does."""
    per_choice: list[list[TokenEvent]] = [[] for _ in range(n)]

    async def gather() -> None:
        async for event in _prepend(first, events):
            per_choice[event.choice].append(event)

    try:  # uvicorn does not cancel a handler whose client left; only `receive` says so (after the body is read)
        collector = await until_disconnect(gather(), request.receive)
    finally:
        await events.aclose()  # cancels the engine's request for whatever choices still decode
    if collector.cancelled():
        raise ClientGone
    collector.result()  # re-raise what broke the generation
    return per_choice


class ClientGone(Exception):
    """The client of a non-streamed request left before its answer was ready; nothing is sent."""


def _usage(prompt_ids: list[int], completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": len(prompt_ids), "completion_tokens": completion_tokens,
            "total_tokens": len(prompt_ids) + completion_tokens}  # fmt: skip


@dataclass
class Answer:
    """What every response to one request carries: its id fields (`meta`), its prompt's ids, and how logprobs read."""

    meta: dict[str, Any]
    prompt_ids: list[int]
    fmt: LogprobFormatter


def chat_body(req: ChatCompletionRequest, answer: Answer, per_choice: list[list[TokenEvent]]) -> dict[str, Any]:
    """A chat completion: each choice's message (its tool calls parsed out of the text), usage, token ids."""
    meta, prompt_ids, fmt = answer.meta, answer.prompt_ids, answer.fmt
    ids, choices = req.return_token_ids, []
    for i, evs in enumerate(per_choice):
        text, finish = "".join(e.text for e in evs), evs[-1].finish_reason
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if req.use_tools():
            content, calls = parse_tool_calls(text)
            if calls:
                message, finish = {"role": "assistant", "content": content, "tool_calls": calls}, "tool_calls"
        choice = {"index": i, "message": message, "finish_reason": finish,
                  "logprobs": {"content": [fmt.chat_entry(e) for e in evs]} if req.logprobs else None}  # fmt: skip
        if ids:
            choice["token_ids"] = [e.token_id for e in evs]
        choices.append(choice)
    body = {**meta, "object": "chat.completion", "choices": choices,
            "usage": _usage(prompt_ids, sum(len(evs) for evs in per_choice))}  # fmt: skip
    if ids:
        body["prompt_token_ids"] = prompt_ids
    return body


def completion_body(req: CompletionRequest, answer: Answer, per_choice: list[list[TokenEvent]]) -> dict[str, Any]:
    """A text completion: each choice's text, usage, token ids."""
    meta, prompt_ids, fmt = answer.meta, answer.prompt_ids, answer.fmt
    choices = []
    for i, evs in enumerate(per_choice):
        choice = {"index": i, "text": "".join(e.text for e in evs), "finish_reason": evs[-1].finish_reason,
                  "logprobs": fmt.completion_block(evs, 0) if req.logprobs is not None else None}  # fmt: skip
        if req.return_token_ids:
            choice["prompt_token_ids"] = prompt_ids
            choice["token_ids"] = [e.token_id for e in evs]
        choices.append(choice)
    return {**meta, "choices": choices, "usage": _usage(prompt_ids, sum(len(evs) for evs in per_choice))}


async def completion_chunks(
    req: CompletionRequest, n: int, answer: Answer, first: TokenEvent, events: AsyncIterator[TokenEvent]
) -> AsyncIterator[str]:
    """A streamed text completion's server-sent events: a chunk per token, prompt ids on a choice's first."""
    meta, prompt_ids, fmt = answer.meta, answer.prompt_ids, answer.fmt
    ids, want_logprobs = req.return_token_ids, req.logprobs is not None
    seen: set[int] = set()
    offsets = [0] * n
    produced = 0
    async for event in _prepend(first, events):
        produced += 1
        choice: dict[str, Any] = {"index": event.choice, "text": event.text, "finish_reason": event.finish_reason,
                                  "logprobs": fmt.completion_block([event], offsets[event.choice]) if want_logprobs else None}  # fmt: skip
        offsets[event.choice] += len(event.text)
        if ids:
            choice["token_ids"] = [event.token_id]
            if event.choice not in seen:
                choice["prompt_token_ids"] = prompt_ids
        seen.add(event.choice)
        yield _sse({**meta, "choices": [choice]})
    if req.stream_options and req.stream_options.include_usage:
        yield _sse({**meta, "choices": [], "usage": _usage(prompt_ids, produced)})
    yield "data: [DONE]\n\n"


async def chat_chunks(
    req: ChatCompletionRequest, n: int, answer: Answer, first: TokenEvent, events: AsyncIterator[TokenEvent]
) -> AsyncIterator[str]:
    """A streamed chat completion's server-sent events: each choice's opening chunk, then one chunk per token."""
    meta, prompt_ids, fmt = {**answer.meta, "object": "chat.completion.chunk"}, answer.prompt_ids, answer.fmt
    tool_streams = [ToolCallStream() for _ in range(n)]
    for i in range(n):
        head = {**meta,
                "choices": [{"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}]}  # fmt: skip
        if req.return_token_ids and i == 0:
            head["prompt_token_ids"] = prompt_ids
        yield _sse(head)
    produced = 0
    async for event in _prepend(first, events):
        produced += 1
        delta: dict[str, Any] = {}
        text, finish = event.text, event.finish_reason
        if req.use_tools():
            text = tool_streams[event.choice].push(text)
            if finish:
                rest, calls = tool_streams[event.choice].finish()
                text += rest
                if calls:
                    delta["tool_calls"] = [{"index": j, **call} for j, call in enumerate(calls)]
                    finish = "tool_calls"
        if text:
            delta["content"] = text
        choice: dict[str, Any] = {"index": event.choice, "delta": delta, "finish_reason": finish,
                                  "logprobs": {"content": [fmt.chat_entry(event)]} if req.logprobs else None}  # fmt: skip
        if req.return_token_ids:
            choice["token_ids"] = [event.token_id]
        yield _sse({**meta, "choices": [choice]})
    if req.stream_options and req.stream_options.include_usage:
        yield _sse({**meta, "choices": [], "usage": _usage(prompt_ids, produced)})
    yield "data: [DONE]\n\n"
