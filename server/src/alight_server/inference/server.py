"""OpenAI-compatible HTTP routes over an InferenceEngine, with vLLM's token-id extension and weight reloads."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel

from alight_server.inference.engine import InferenceEngine
from alight_server.inference.generation import TokenEvent
from alight_server.inference.guard.alight_keyguard import KeyGuard
from alight_server.inference.logprobs import LogprobFormatter
from alight_server.inference.protocol import ChatCompletionRequest, CompletionRequest, chat_messages
from alight_server.inference.sampling import InvalidRequest
from alight_server.inference.tool_calls import ToolCallStream, parse_tool_calls
from alight_server.inference.weights import WeightsError

VERSION_HEADER = "X-Alight-Policy-Version"


class WeightsUpdate(BaseModel):
    path: str
    adapter: str | None = None  # set: `path` holds that LoRA adapter's tensors (adapter_model.safetensors)


class _HttpError(Exception):
    def __init__(self, status: int, message: str, type_: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.type, self.param, self.code = status, type_, param, code


def _error(status: int, message: str, type_: str, param: str | None = None, code: str | None = None) -> JSONResponse:
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return JSONResponse(body, status_code=status)


def _sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


async def _prepend(first: TokenEvent, rest: AsyncIterator[TokenEvent]) -> AsyncIterator[TokenEvent]:
    yield first
    async for event in rest:
        yield event


async def _closing(body: AsyncIterator[str], events: AsyncGenerator[TokenEvent, None]) -> AsyncIterator[str]:
    """Stream `body`; when it ends or the client goes away, close `events`, which cancels the request's choices."""
    try:
        async for chunk in body:
            yield chunk
    finally:
        await events.aclose()


async def _collect(
    first: TokenEvent, events: AsyncGenerator[TokenEvent, None], n: int, request: Request
) -> list[list[TokenEvent]]:
    """Every choice's events; a client that goes away first cancels them (ClientGone), as a left stream does."""
    per_choice: list[list[TokenEvent]] = [[] for _ in range(n)]

    async def gather() -> None:
        async for event in _prepend(first, events):
            per_choice[event.choice].append(event)

    collector = asyncio.ensure_future(gather())
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((collector, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (watcher, collector):
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await events.aclose()  # cancels the engine's request for whatever choices still decode
    if collector.cancelled():
        raise ClientGone
    collector.result()  # re-raise what broke the generation
    return per_choice


class ClientGone(Exception):
    """The client of a non-streamed request left before its answer was ready; nothing is sent."""


async def _disconnected(request: Request) -> None:
    # Uvicorn does not cancel a handler whose client left; only `receive` says so (after the body is read).
    while (await request.receive())["type"] != "http.disconnect":
        pass


def create_inference_app(engine: InferenceEngine, api_key: str, admin_key: str | None = None) -> FastAPI:
    """The app serves `engine` (starting it if needed). Every route but /health needs a key (KeyGuard):
    `api_key` opens /v1/*, `admin_key` every route, /admin/weights included (None: no key opens them)."""
    if not api_key or admin_key == "":
        raise ValueError("the inference server needs a non-empty api_key (and admin_key, when given)")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        started_here = engine._thread is None  # pyright: ignore[reportPrivateUsage]
        engine.start()
        yield
        if started_here:  # an engine shared with an in-process trainer outlives the app
            engine.stop()

    app = FastAPI(title="alight inference", lifespan=lifespan)
    app.add_middleware(KeyGuard, api_key=api_key, admin_key=admin_key, open_paths=("/health", "/healthz"))
    tokenizer = engine.tokenizer
    fmt = LogprobFormatter(tokenizer)

    @app.exception_handler(InvalidRequest)
    async def invalid_request(request: Request, exc: InvalidRequest) -> JSONResponse:
        return _error(400, str(exc), "invalid_request_error", exc.param)

    @app.exception_handler(ClientGone)
    async def client_gone(request: Request, exc: ClientGone) -> Response:
        return Response(status_code=499)  # nobody reads it: the status nginx logs for a client that left

    @app.exception_handler(WeightsError)
    async def bad_weights(request: Request, exc: WeightsError) -> JSONResponse:
        return _error(400, str(exc), "invalid_request_error", "path")

    @app.exception_handler(_HttpError)
    async def http_error(request: Request, exc: _HttpError) -> JSONResponse:
        return _error(exc.status, str(exc), exc.type, exc.param, exc.code)

    @app.exception_handler(RequestValidationError)
    async def malformed_body(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return _error(
            400,
            f"invalid request body at {where or 'body'}: {first.get('msg', exc)}",
            "invalid_request_error",
            where or None,
        )

    def check_model(name: str) -> str | None:
        """The request's adapter (an engine with adapters serves each by its name), else None."""
        served = engine.served_names
        if name not in served:
            # A 400 like every other bad request (OpenAI itself answers 404 here; clients
            # treat both as final, and the gateway never sends another model's name anyway).
            listed = ", ".join(repr(n) for n in served)
            raise _HttpError(
                400,
                f"The model {name!r} does not exist; this server serves {listed}.",
                "invalid_request_error",
                "model",
                "model_not_found",
            )
        return name if engine.adapters is not None else None

    def headers(version: int) -> dict[str, str]:
        return {VERSION_HEADER: str(version)}

    def render_chat(req: ChatCompletionRequest) -> list[int]:
        messages = chat_messages(req.messages)
        try:
            text = tokenizer.apply_chat_template(
                messages, tools=req.tools if req.use_tools() else None, add_generation_prompt=True, tokenize=False
            )
        except Exception as exc:  # jinja errors: the conversation cannot be rendered by this template
            raise InvalidRequest(f"the chat template cannot render these messages: {exc}", "messages") from exc
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    async def start(prompt_ids: list[int], params: Any) -> tuple[TokenEvent, AsyncGenerator[TokenEvent, None]]:
        """Submit and wait for the first token, so bad requests fail with a 400 before any bytes are sent."""
        events = engine.stream(prompt_ids, params)
        return await anext(events), events

    def usage(prompt_ids: list[int], completion_tokens: int) -> dict[str, int]:
        return {"prompt_tokens": len(prompt_ids), "completion_tokens": completion_tokens,
                "total_tokens": len(prompt_ids) + completion_tokens}  # fmt: skip

    @app.post("/v1/chat/completions")
    async def chat_completions(req: ChatCompletionRequest, request: Request) -> Any:
        adapter = check_model(req.model)
        params = req.sampling_params()
        params.adapter = adapter
        prompt_ids = render_chat(req)
        first, events = await start(prompt_ids, params)
        rid, created, version = f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), first.policy_version
        meta = {"id": rid, "created": created, "model": req.model, "system_fingerprint": f"alight-policy-{version}"}
        ids = req.return_token_ids

        if req.stream:

            async def sse() -> AsyncIterator[str]:
                tool_streams = [ToolCallStream() for _ in range(params.n)]
                produced = 0
                for i in range(params.n):
                    head = {**meta, "object": "chat.completion.chunk",
                            "choices": [{"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}]}  # fmt: skip
                    if ids and i == 0:
                        head["prompt_token_ids"] = prompt_ids
                    yield _sse(head)
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
                    if ids:
                        choice["token_ids"] = [event.token_id]
                    yield _sse({**meta, "object": "chat.completion.chunk", "choices": [choice]})
                if req.stream_options and req.stream_options.include_usage:
                    yield _sse(
                        {**meta, "object": "chat.completion.chunk", "choices": [], "usage": usage(prompt_ids, produced)}
                    )
                yield "data: [DONE]\n\n"

            return StreamingResponse(_closing(sse(), events), media_type="text/event-stream", headers=headers(version))

        per_choice = await _collect(first, events, params.n, request)
        choices = []
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
                "usage": usage(prompt_ids, sum(len(evs) for evs in per_choice))}  # fmt: skip
        if ids:
            body["prompt_token_ids"] = prompt_ids
        return JSONResponse(body, headers=headers(version))

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest, request: Request) -> Any:
        adapter = check_model(req.model)
        params = req.sampling_params()
        params.adapter = adapter
        prompt_ids = req.prompt_ids(tokenizer)
        first, events = await start(prompt_ids, params)
        rid, created, version = f"cmpl-{uuid.uuid4().hex}", int(time.time()), first.policy_version
        meta = {"id": rid, "object": "text_completion", "created": created, "model": req.model,
                "system_fingerprint": f"alight-policy-{version}"}  # fmt: skip
        ids, want_logprobs = req.return_token_ids, req.logprobs is not None

        if req.stream:

            async def sse() -> AsyncIterator[str]:
                seen: set[int] = set()
                offsets = [0] * params.n
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
                    yield _sse({**meta, "choices": [], "usage": usage(prompt_ids, produced)})
                yield "data: [DONE]\n\n"

            return StreamingResponse(_closing(sse(), events), media_type="text/event-stream", headers=headers(version))

        per_choice = await _collect(first, events, params.n, request)
        choices = []
        for i, evs in enumerate(per_choice):
            choice = {"index": i, "text": "".join(e.text for e in evs), "finish_reason": evs[-1].finish_reason,
                      "logprobs": fmt.completion_block(evs, 0) if want_logprobs else None}  # fmt: skip
            if ids:
                choice["prompt_token_ids"] = prompt_ids
                choice["token_ids"] = [e.token_id for e in evs]
            choices.append(choice)
        body = {**meta, "choices": choices, "usage": usage(prompt_ids, sum(len(evs) for evs in per_choice))}
        return JSONResponse(body, headers=headers(version))

    @app.get("/v1/models")
    async def models() -> Any:
        cards = [{"id": name, "object": "model", "created": 0, "owned_by": "alight",
                  "max_model_len": engine.max_model_len, "policy_version": engine.policy_version(name)}
                 for name in engine.served_names]  # fmt: skip
        return JSONResponse({"object": "list", "data": cards}, headers=headers(engine.version))

    @app.get("/healthz")
    @app.get("/health")
    async def health() -> Any:
        body = {"status": "ok", "model": engine.model_name, "policy_version": engine.version}
        return JSONResponse(body, headers=headers(engine.version))

    @app.post("/admin/weights")
    async def load_weights(update: WeightsUpdate) -> Any:
        if update.adapter is None:
            version = await asyncio.to_thread(engine.update_weights, update.path)
            return JSONResponse({"policy_version": version}, headers=headers(version))
        version = await asyncio.to_thread(engine.update_adapter, update.adapter, update.path)
        return JSONResponse({"policy_version": version, "adapter": update.adapter}, headers=headers(version))

    return app
