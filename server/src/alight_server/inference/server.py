"""OpenAI-compatible HTTP routes over an InferenceEngine, with vLLM's token-id extension and weight reloads."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
import uuid
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel

from alight_server.http.error_types import error_body
from alight_server.inference.engine import InferenceEngine
from alight_server.inference.generation import TokenEvent
from alight_server.inference.guard.alight_keyguard import KeyGuard
from alight_server.inference.logprobs import LogprobFormatter
from alight_server.inference.protocol import ChatCompletionRequest, CompletionRequest, chat_messages
from alight_server.inference.responses import (
    Answer,
    ClientGone,
    chat_body,
    chat_chunks,
    closing,
    collect,
    completion_body,
    completion_chunks,
)
from alight_server.inference.sampling import InvalidRequest
from alight_server.inference.weights import WeightsError

VERSION_HEADER = "X-Alight-Policy-Version"


class WeightsUpdate(BaseModel):
    path: str
    adapter: str | None = None  # set: `path` holds that LoRA adapter's tensors (adapter_model.safetensors)


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
    for failure in (InvalidRequest, ClientGone, WeightsError, RequestValidationError):
        app.add_exception_handler(failure, _failure)
    app.state.routes = InferenceRoutes(engine)  # the app owns its routes; its endpoints hold them weakly
    app.include_router(app.state.routes.router())
    return app


async def _failure(request: Request, exc: Exception) -> Response:
    """The answer to each failure the app hands here: a 400 naming the field at fault, or an empty 499."""
    if isinstance(exc, ClientGone):
        return Response(status_code=499)  # nobody reads it: the status nginx logs for a client that left
    message, param, code = str(exc), "path", None  # a WeightsError: the weights at `path` cannot be loaded
    if isinstance(exc, RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        param = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or None
        message = f"invalid request body at {param or 'body'}: {first.get('msg', exc)}"
    elif isinstance(exc, InvalidRequest):
        param, code = exc.param, exc.code
    return JSONResponse(error_body(400, message, param=param, code=code), status_code=400)


def _headers(version: int) -> dict[str, str]:
    return {VERSION_HEADER: str(version)}


def _event_stream(chunks: AsyncIterator[str], events: AsyncGenerator[TokenEvent, None], version: int) -> Response:
    return StreamingResponse(closing(chunks, events), media_type="text/event-stream", headers=_headers(version))


def _weak_endpoint(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """`method` (a bound coroutine method) as a route endpoint that holds its object weakly.

    FastAPI keeps every endpoint it has classified in module-level `lru_cache`s of 4096 entries
    (fastapi/dependencies/models.py); a bound method there kept its `InferenceRoutes`, so the engine, its model
    and its prefix cache, alive after the server closed: one more copy per run in a process."""
    owner, name = weakref.ref(getattr(method, "__self__")), method.__name__  # noqa: B009 (Callable has no __self__)

    async def endpoint(*args: Any, **kwargs: Any) -> Any:
        routes = owner()
        if routes is None:
            raise RuntimeError(f"{name}: the inference server these routes served is gone")
        return await getattr(routes, name)(*args, **kwargs)

    endpoint.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]  # what FastAPI reads
    endpoint.__name__ = endpoint.__qualname__ = name
    endpoint.__doc__ = method.__doc__
    return endpoint


class InferenceRoutes:
    """The routes over one engine: each a method, `router()` names their paths."""

    def __init__(self, engine: InferenceEngine) -> None:
        self.engine = engine
        self.tokenizer = engine.tokenizer
        self.fmt = LogprobFormatter(engine.tokenizer)

    def router(self) -> APIRouter:
        router = APIRouter()
        router.add_api_route("/v1/chat/completions", _weak_endpoint(self.chat_completions), methods=["POST"])
        router.add_api_route("/v1/completions", _weak_endpoint(self.completions), methods=["POST"])
        router.add_api_route("/v1/models", _weak_endpoint(self.models), methods=["GET"])
        router.add_api_route("/healthz", _weak_endpoint(self.health), methods=["GET"])
        router.add_api_route("/health", _weak_endpoint(self.health), methods=["GET"])
        router.add_api_route("/admin/weights", _weak_endpoint(self.load_weights), methods=["POST"])
        return router

    def check_model(self, name: str) -> str | None:
        """The request's adapter (an engine with adapters serves each by its name), else None."""
        served = self.engine.served_names
        if name not in served:
            # A 400 like every other bad request (OpenAI itself answers 404 here; clients
            # treat both as final, and the gateway never sends another model's name anyway).
            listed = ", ".join(repr(n) for n in served)
            message = f"The model {name!r} does not exist; this server serves {listed}."
            raise InvalidRequest(message, "model", "model_not_found")
        return name if self.engine.adapters is not None else None

    def render_chat(self, req: ChatCompletionRequest) -> list[int]:
        messages = chat_messages(req.messages)
        try:
            text = self.tokenizer.apply_chat_template(
                messages, tools=req.tools if req.use_tools() else None, add_generation_prompt=True, tokenize=False
            )
        except Exception as exc:  # jinja errors: the conversation cannot be rendered by this template
            raise InvalidRequest(f"the chat template cannot render these messages: {exc}", "messages") from exc
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    async def start(
        self, req: ChatCompletionRequest | CompletionRequest, prompt: Callable[[], list[int]], meta: dict[str, Any]
    ) -> tuple[Answer, int, TokenEvent, AsyncGenerator[TokenEvent, None]]:
        """Check `req`, submit its prompt and wait for the first token, so bad requests fail with a 400 before any
        bytes are sent -> (the answer's `meta` completed, choices, first event, the events)."""
        adapter = self.check_model(req.model)
        params = req.sampling_params()
        params.adapter = adapter
        prompt_ids = prompt()
        events = self.engine.stream(prompt_ids, params)
        first = await anext(events)
        meta.update(
            created=int(time.time()), model=req.model, system_fingerprint=f"alight-policy-{first.policy_version}"
        )
        return Answer(meta, prompt_ids, self.fmt), params.n, first, events

    async def chat_completions(self, req: ChatCompletionRequest, request: Request) -> Any:
        meta = {"id": f"chatcmpl-{uuid.uuid4().hex}"}
        answer, n, first, events = await self.start(req, lambda: self.render_chat(req), meta)
        if req.stream:
            return _event_stream(chat_chunks(req, n, answer, first, events), events, first.policy_version)
        body = chat_body(req, answer, await collect(first, events, n, request))
        return JSONResponse(body, headers=_headers(first.policy_version))

    async def completions(self, req: CompletionRequest, request: Request) -> Any:
        meta = {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion"}
        answer, n, first, events = await self.start(req, lambda: req.prompt_ids(self.tokenizer), meta)
        if req.stream:
            return _event_stream(completion_chunks(req, n, answer, first, events), events, first.policy_version)
        body = completion_body(req, answer, await collect(first, events, n, request))
        return JSONResponse(body, headers=_headers(first.policy_version))

    async def models(self) -> Any:
        engine = self.engine
        cards = [{"id": name, "object": "model", "created": 0, "owned_by": "alight",
                  "max_model_len": engine.max_model_len, "policy_version": engine.policy_version(name)}
                 for name in engine.served_names]  # fmt: skip
        return JSONResponse({"object": "list", "data": cards}, headers=_headers(engine.version))

    async def health(self) -> Any:
        body = {"status": "ok", "model": self.engine.model_name, "policy_version": self.engine.version}
        return JSONResponse(body, headers=_headers(self.engine.version))

    async def load_weights(self, update: WeightsUpdate) -> Any:
        if update.adapter is None:
            version = await asyncio.to_thread(self.engine.update_weights, update.path)
            return JSONResponse({"policy_version": version}, headers=_headers(version))
        version = await asyncio.to_thread(self.engine.update_adapter, update.adapter, update.path)
        return JSONResponse({"policy_version": version, "adapter": update.adapter}, headers=_headers(version))
