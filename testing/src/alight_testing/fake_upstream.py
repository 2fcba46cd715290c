"""An OpenAI-compatible inference double that answers the way vLLM does, with injectable faults.

Responses carry vLLM's token-tracing extensions when the request sets
`return_token_ids`: `prompt_token_ids` (chat: on the response / first chunk;
completions: on the choice) and per-choice `token_ids` (streamed: per chunk).
Every call is logged on `app.state.fake` so tests can compare what the agent
saw, and what was recorded, with what this upstream produced.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import TypeAdapter, ValidationError

from alight_testing.fake_model import (
    Choice,
    FakeModel,
    FakeTokenizer,
    Reasoning,
    ToolRule,
    default_tool_rule,
    message_text,
    render_chat,
    schema_arguments,
)
from alight_testing.fake_wire import (
    chat_chunk,
    chat_response,
    completion_chunk,
    completion_response,
    usage,
)


@dataclass
class Faults:
    """What the next calls do wrong. Counters count down as calls consume them."""

    latency_s: float = 0.0  # added before every answer
    hang_s: float = 0.0  # sleep this long before answering (a hung upstream)
    hold: threading.Event | None = None  # answer only once set: the test decides when calls end (no timing race)
    # the same, for the calls that name one model (several policies: one adapter's calls held, the others not)
    hold_by_model: dict[str, threading.Event] = field(default_factory=dict)
    fail_times: int = 0  # answer the next N calls with fail_status
    fail_status: int = 500
    retry_after_s: float | None = None  # Retry-After on failures (429)
    garbage_times: int = 0  # answer the next N calls with a 200 that is not JSON
    stream_cut_times: int = 0  # streams: close the next N after the first chunks, without [DONE]


@dataclass
class LoggedCall:
    path: str
    request: dict[str, Any]
    headers: dict[str, str]
    status: int = 200
    response: dict[str, Any] | None = None  # the full (non-streamed equivalent) response
    streamed: bool = False


@dataclass
class FakeUpstreamState:
    model: str
    tokenizer: FakeTokenizer
    fake: FakeModel
    faults: Faults = field(default_factory=Faults)
    calls: list[LoggedCall] = field(default_factory=list)
    max_model_len: int = 32768
    # LoRA adapter names served besides `model` (as vLLM's --lora-modules): a request may name one as its model.
    adapters: tuple[str, ...] = ()
    # A scripted chat answer: messages -> the text to answer with (None: the usual echo). A scripted judge, say.
    chat_rule: Callable[[list[dict[str, Any]]], str | None] | None = None
    tag_scripted: bool = True  # False: a chat_rule's text is the whole answer (a benchmark's exact call syntax)


def _error(status: int, message: str, param: str | None = None) -> Response:
    kind = {400: "BadRequestError", 404: "NotFoundError", 429: "RateLimitError"}.get(status, "InternalServerError")
    body = {"error": {"message": message, "type": kind, "param": param, "code": status}}
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


# vLLM's request models are pydantic in lax mode: "5" and 5.0 are the integer 5 there, 1.5 is refused.
_INT = TypeAdapter(int)
# vLLM's default --max-logprobs.
MAX_LOGPROBS = 20


def _whole(value: Any, least: int) -> bool:
    try:
        return least <= _INT.validate_python(value) < 2**63
    except ValidationError:
        return False


def vllm_refusal(body: dict[str, Any], vocab_size: int) -> tuple[str, str] | None:
    """(param, message) for a body vLLM's request validation answers with 400, else None.

    Written from vLLM's OpenAI protocol models (pydantic in lax mode: "5" is 5, 1.5 no int; max_tokens >= 1,
    seed within int64, every message has a role, prompt ids inside the vocabulary), on
    purpose independent of the gateway's own checks, so tests see what the gateway lets through.
    """
    if "model" in body and not isinstance(body["model"], str | None):
        return "model", "model: Input should be a valid string"
    for name in ("max_tokens", "max_completion_tokens", "n"):
        if body.get(name) is not None and not _whole(body[name], 1):
            return name, f"{name}: must be an integer >= 1"
    if body.get("seed") is not None and not _whole(body["seed"], -(2**63)):
        return "seed", "seed: Input should be a valid integer within int64"
    temperature = body.get("temperature")
    if isinstance(temperature, int | float) and not isinstance(temperature, bool) and temperature < 0:
        return "temperature", f"temperature must be non-negative, got {float(temperature)}."
    for name in ("top_logprobs", "logprobs"):  # chat: top_logprobs; completions: logprobs (an int)
        count = body.get(name)
        if _whole(count, 0) and _INT.validate_python(count) > MAX_LOGPROBS:
            return (
                "logprobs",
                f"Requested sample logprobs of {count}, which is greater than max allowed: {MAX_LOGPROBS}",
            )
    tools, stop = body.get("tools"), body.get("stop")
    if tools is not None and not (
        isinstance(tools, list) and all(isinstance(t, dict) and isinstance(t.get("function"), dict) for t in tools)
    ):
        return "tools", "tools: Input should be a valid list of tool objects"
    if (
        stop is not None
        and not isinstance(stop, str)
        and not (isinstance(stop, list) and all(isinstance(x, str) for x in stop))
    ):
        return "stop", "stop: Input should be a string or a list of strings"
    for i, message in enumerate(body.get("messages") or []):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            return "messages", f"messages.{i}: every message needs a string role"
        if message.get("content") is None and not (message["role"] == "assistant" and message.get("tool_calls")):
            return "messages", f"messages.{i}.content: Input should be a valid string or list"
    prompt = body.get("prompt")
    if isinstance(prompt, list) and any(isinstance(t, int) and not 0 <= t < vocab_size for t in prompt):
        return "prompt", f"prompt: token id out of vocabulary (size {vocab_size})"
    return None


class Reply(NamedTuple):
    """What the fake model answered one call with: the response id, the prompt's ids, the choices."""

    rid: str
    prompt_ids: list[int]
    choices: list[Choice]


# A wire format: (response id, model, prompt ids, choices, request body, tokenizer) -> the JSON sent.
Wire = Callable[[str, str, list[int], list[Choice], dict[str, Any], FakeTokenizer], Any]


def create_fake_upstream(
    model: str = "fake",
    *,
    vocab_size: int = 32000,
    tool_rule: ToolRule = default_tool_rule,
    faults: Faults | None = None,
    reasoning: Reasoning = None,
    adapters: tuple[str, ...] = (),
    chat_rule: Callable[[list[dict[str, Any]]], str | None] | None = None,
    tag_scripted: bool = True,
) -> FastAPI:
    """An app serving `/v1/chat/completions`, `/v1/completions` and `/v1/models` for `model` (and `adapters`)."""
    tokenizer = FakeTokenizer(vocab_size)
    fake = FakeModel(tokenizer, tool_rule, reasoning)
    state = FakeUpstreamState(model=model, tokenizer=tokenizer, fake=fake, adapters=adapters, chat_rule=chat_rule,
                              tag_scripted=tag_scripted)  # fmt: skip
    state.faults = faults or Faults()
    app = FastAPI(title="alight fake upstream")
    app.state.fake = state

    async def admit(request: Request, logged: LoggedCall) -> Response | None:
        """Apply configured faults; a Response means answer with it instead."""
        f = state.faults
        if f.latency_s:
            await asyncio.sleep(f.latency_s)
        if f.hang_s:
            await asyncio.sleep(f.hang_s)
        if f.hold is not None:
            await asyncio.to_thread(f.hold.wait, 60)
        if (held := f.hold_by_model.get(str(logged.request.get("model")))) is not None:
            await asyncio.to_thread(held.wait, 60)
        if f.fail_times > 0:
            f.fail_times -= 1
            resp = _error(f.fail_status, f"injected failure {f.fail_status}")
            if f.retry_after_s is not None:
                resp.headers["retry-after"] = str(f.retry_after_s)
            logged.status = f.fail_status
            return resp
        if f.garbage_times > 0:
            f.garbage_times -= 1
            return Response(b"<html>502 upstream garbage", status_code=200, media_type="application/json")
        return None

    def log_call(request: Request) -> LoggedCall:
        """Every call is logged as it arrives, before anything can refuse it."""
        logged = LoggedCall(path=request.url.path, request={}, headers=dict(request.headers))
        state.calls.append(logged)
        return logged

    async def read_body(request: Request, logged: LoggedCall) -> dict[str, Any] | Response:
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError as exc:
            return _error(400, f"request body is not valid JSON: {exc}")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object")
        logged.request = body
        if (refusal := vllm_refusal(body, tokenizer.vocab_size)) is not None:
            return _error(400, refusal[1], refusal[0])
        if body.get("model") not in (None, state.model, *state.adapters):
            return _error(404, f"The model `{body.get('model')}` does not exist.", "model")
        return body

    def respond(logged: LoggedCall, body: dict[str, Any], reply: Reply, whole: Wire, chunked: Wire) -> Response:
        """The reply in one body, or streamed as chunks when the body asks; the call logs the whole one either way."""
        rid, prompt_ids, choices = reply
        logged.response = whole(rid, state.model, prompt_ids, choices, body, tokenizer)
        logged.streamed = bool(body.get("stream"))
        if not logged.streamed:
            return Response(orjson.dumps(logged.response), media_type="application/json")
        chunks = chunked(rid, state.model, prompt_ids, choices, body, tokenizer)
        return StreamingResponse(
            _stream(chunks, body, usage(len(prompt_ids), choices), rid), media_type="text/event-stream"
        )

    def sampling(body: dict[str, Any]) -> dict[str, Any]:
        stop = body.get("stop")
        return {
            "seed": body.get("seed"),
            "max_tokens": _INT.validate_python(body.get("max_completion_tokens") or body.get("max_tokens") or 0)
            or None,
            "stop": [stop] if isinstance(stop, str) else list(stop or []),
        }

    def chat_choices(body: dict[str, Any], prompt: str) -> list[Choice]:
        messages = body["messages"]
        tools = body.get("tools") or []
        choice = body.get("tool_choice")
        trailing_tools = []
        for m in reversed(messages):
            if m.get("role") != "tool":
                break
            trailing_tools.insert(0, message_text(m.get("content")))
        calls: list[tuple[str, dict[str, Any]]] = []
        scripted = state.chat_rule(messages) if state.chat_rule is not None else None
        if scripted is not None:
            answer = scripted
        elif trailing_tools:
            answer = "Tool results: " + "; ".join(trailing_tools)
        else:
            user = next((m for m in reversed(messages) if m.get("role") == "user"), {})
            answer = message_text(user.get("content"))
            if tools and choice != "none":
                calls = state.fake.tool_rule(tools, answer)
                if not calls and isinstance(choice, dict):
                    named = next(t for t in tools if t["function"]["name"] == choice["function"]["name"])
                    calls = [(named["function"]["name"], schema_arguments(named))]
                elif not calls and choice == "required":
                    calls = [(tools[0]["function"]["name"], schema_arguments(tools[0]))]
        n = int(body.get("n") or 1)
        tagged = scripted is None or state.tag_scripted
        return [state.fake.reply(prompt, answer, index=i, tool_calls=calls, tagged=tagged, **sampling(body))
                for i in range(n)]  # fmt: skip

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        entry = {"id": state.model, "object": "model", "created": 0, "owned_by": "alight-fake", "root": state.model}
        loras = [{**entry, "id": name, "parent": state.model} for name in state.adapters]
        return {"object": "list", "data": [{**entry, "max_model_len": state.max_model_len}, *loras]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        logged = log_call(request)
        body = await read_body(request, logged)
        if isinstance(body, Response):
            return body
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return _error(400, "`messages` must be a non-empty list", "messages")
        if (fault := await admit(request, logged)) is not None:
            return fault
        prompt = render_chat(body["messages"], body.get("tools"))
        prompt_ids = tokenizer.encode(prompt)
        choices = chat_choices(body, prompt)
        rid = "chatcmpl-" + hashlib.sha256(prompt.encode()).hexdigest()[:24]
        return respond(logged, body, Reply(rid, prompt_ids, choices), chat_response, chat_chunk)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        logged = log_call(request)
        body = await read_body(request, logged)
        if isinstance(body, Response):
            return body
        prompt = body.get("prompt")
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            prompt_ids, prompt_text = list(prompt), " ".join(map(str, prompt))
        elif isinstance(prompt, str) and prompt:
            prompt_ids, prompt_text = tokenizer.encode(prompt), prompt
        else:
            return _error(400, "`prompt` must be a non-empty string or list of token ids", "prompt")
        if (fault := await admit(request, logged)) is not None:
            return fault
        answer = prompt_text.strip().splitlines()[-1] if prompt_text.strip() else ""
        n = int(body.get("n") or 1)
        choices = [state.fake.reply(prompt_text, answer, index=i, **sampling(body)) for i in range(n)]
        rid = "cmpl-" + hashlib.sha256(prompt_text.encode()).hexdigest()[:24]
        return respond(logged, body, Reply(rid, prompt_ids, choices), completion_response, completion_chunk)

    @app.post("/fake/faults")
    async def set_faults(request: Request) -> dict[str, Any]:
        """Replace the fault plan (for upstreams running in another process)."""
        state.faults = Faults(**orjson.loads(await request.body()))
        return {"ok": True}

    async def _stream(
        chunks: list[dict[str, Any]], body: dict[str, Any], totals: dict[str, Any], rid: str
    ) -> AsyncIterator[bytes]:
        cut = state.faults.stream_cut_times > 0
        if cut:
            state.faults.stream_cut_times -= 1
        for i, chunk in enumerate(chunks):
            if cut and i == 2:
                return  # the connection ends mid-stream without [DONE]
            yield _sse(chunk)
            await asyncio.sleep(0)
        if (body.get("stream_options") or {}).get("include_usage"):
            obj = "chat.completion.chunk" if rid.startswith("chatcmpl") else "text_completion"
            yield _sse(
                {
                    "id": rid,
                    "object": obj,
                    "created": int(time.time()),
                    "model": state.model,
                    "choices": [],
                    "usage": totals,
                }
            )
        yield b"data: [DONE]\n\n"

    return app
