"""One model call's life through the gateway: admit, prepare, forward, relay or answer, record."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
import orjson

from alight.schemas import Mode
from alight_server.gateway.callers import CallerAttempt
from alight_server.gateway.capture.record import CallRecord, Tokens, parse_traceparent, tokens_of
from alight_server.gateway.container import Gateway
from alight_server.gateway.errors import GatewayError
from alight_server.gateway.flavours.base import Flavour
from alight_server.gateway.limits.refusals import Refusal
from alight_server.gateway.limits.verdict import breach_event
from alight_server.gateway.reply import EVENT_STREAM, Reply
from alight_server.gateway.request.checks import check_upstream_body
from alight_server.gateway.request.relay import StreamRelay
from alight_server.gateway.upstream.pool import Target
from alight_server.gateway.upstream.proxy import UpstreamReply
from alight_server.http.json_depth import TooDeep, loads_within_depth
from alight_server.policies.routing import CallFacts, GatewayRouting, Unroutable, route

log = logging.getLogger("alight.gateway")

MAX_TOKENS_CAP = "alight_max_tokens_cap"  # in a recorded request: the gateway lowered its output budget


@dataclass(slots=True)
class Call:
    """One admitted call: what the agent sent, what goes upstream, and the record it leaves."""

    flavour: Flavour
    body: dict[str, Any]
    upstream: dict[str, Any]
    record: CallRecord
    deadline: float


def parse_body(raw: bytes) -> dict[str, Any]:
    """The agent's JSON object (the body reader already enforced the size limit)."""
    try:
        body = loads_within_depth(raw, "request body")  # only bodies with many brackets are walked
    except TooDeep as exc:
        raise GatewayError(400, str(exc)) from None
    except orjson.JSONDecodeError as exc:
        raise GatewayError(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise GatewayError(400, f"request body must be a JSON object, got {type(body).__name__}")
    return body


def translate(flavour: Flavour, body: dict[str, Any]) -> dict[str, Any]:
    """The flavour's upstream request; a body of the wrong shape anywhere is the caller's 400, never a 500."""
    try:
        return flavour.to_upstream(body)
    except GatewayError:
        raise
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        raise GatewayError(400, f"malformed {flavour.kind.value} request: {exc}") from exc


def capped(upstream: dict[str, Any], body: dict[str, Any], cap: int, path: str) -> dict[str, Any]:
    """Apply the output-token cap to `upstream`; the request to record, noting the cap when it lowered one."""
    keys = [k for k in ("max_tokens", "max_completion_tokens") if upstream.get(k) is not None]
    if not keys and path == "/completions":
        return body  # the completions default (16) is already a bound
    asked = min((upstream[k] for k in keys if isinstance(upstream[k], int)), default=None)
    if asked is not None and asked <= cap:
        return body
    for key in keys or ["max_tokens"]:
        upstream[key] = cap
    return {**body, MAX_TOKENS_CAP: {"cap": cap, "asked": asked}}


def routed_policy(routing: GatewayRouting, upstream: dict[str, Any], who: tuple[str | None, str | None]) -> str:
    """The policy that serves this call (routing.py); a 400 naming the rule to add when none does."""
    model = upstream.get("model")
    try:
        return route(routing, CallFacts(who[0], model if isinstance(model, str) else None, who[1]))
    except Unroutable as exc:
        raise GatewayError(400, str(exc)) from None


def _upstream_message(reply: UpstreamReply) -> str:
    try:
        err = orjson.loads(reply.body).get("error")
        return str(err.get("message") if isinstance(err, dict) else err)
    except (orjson.JSONDecodeError, AttributeError):
        return reply.text()


class CallPipeline:
    """The request path; everything it uses lives on the Gateway container."""

    def __init__(self, gateway: Gateway) -> None:
        self.gw = gateway

    async def handle(
        self,
        flavour: Flavour,
        read_body: Callable[[], Awaitable[bytes]],
        token: str | None,
        traceparent: str | None = None,
        path_rollout: str | None = None,
        path_attempt: int | None = None,
        who: tuple[str | None, str | None] = (None, None),
    ) -> Reply:
        """One agent call, from its token and body to the reply it gets (errors included).

        `who` is the caller's agent name and harness role (X-Alight-Agent, X-Alight-Role), used by routing.
        """
        try:
            caller = await self._admit(token, path_rollout, path_attempt, flavour.anthropic_errors)
        except GatewayError as exc:
            return self._refused(exc, flavour)
        reply: Reply | None = None
        held: str | None = None  # the policy this call counts under once routed (it leaves with it)
        try:
            call = await self._prepare(flavour, caller, await read_body(), traceparent, who)
            if (policy := call.record.policy) is not None:
                if not self.gw.gate.enter_policy(policy):  # a paused policy's call: the same 429 (its slot freed below)
                    raise self._paused(f"policy {policy!r} is paused for its update")
                held = policy
            try:
                reply = await self._forward(call, caller)
            except asyncio.CancelledError:  # the agent disconnected (client_gone.py): keep what is known
                await self.gw.recorder.gone(call.record)
                raise
            return reply
        except GatewayError as exc:
            return self._refused(exc, flavour)
        finally:
            if reply is None or reply.release is None:  # a stream frees its slot when it ends
                self.gw.gate.leave(held)

    async def _admit(
        self, token: str | None, rollout: str | None, attempt: int | None, anthropic: bool
    ) -> CallerAttempt:
        caller = await self.gw.attempts.resolve(token, rollout, attempt)
        if not self.gw.gate.enter():
            raise self._paused("the gateway is paused for a policy update")
        refusal = self.gw.limits.admit(caller)  # after the pause: a call paused is not counted
        if refusal is not None:
            self.gw.gate.leave(None)
            if refusal.first:
                await self._record_breach(caller, refusal)
            raise refusal.error(anthropic)
        return caller

    async def _record_breach(self, caller: CallerAttempt, refusal: Refusal) -> None:
        """The attempt's budget breach, in the store: it ends the attempt budget_exceeded (limits/verdict.py)."""
        event = breach_event(caller.attempt, refusal)
        try:
            await anyio.to_thread.run_sync(self.gw.store.add_event, caller.rollout_id, event)
        except Exception:
            log.exception("could not record the budget breach of %s attempt %s", caller.rollout_id, caller.attempt)

    def _paused(self, what: str) -> GatewayError:
        wait = self.gw.config.retry_after_s
        return GatewayError(
            429,
            f"{what}; retry after the Retry-After delay",
            headers={"retry-after": f"{wait:g}", "retry-after-ms": str(int(wait * 1000))},
        )

    def _refused(self, exc: GatewayError, flavour: Flavour) -> Reply:
        self.gw.metrics.reject(exc.status)
        return exc.reply(flavour.anthropic_errors)

    async def _prepare(
        self,
        flavour: Flavour,
        caller: CallerAttempt,
        raw: bytes,
        traceparent: str | None,
        who: tuple[str | None, str | None],
    ) -> Call:
        """The agent's body checked and translated, what training needs forced on it, its record begun."""
        body = parse_body(raw)
        upstream = translate(flavour, body)
        check_upstream_body(upstream)
        cfg = self.gw.config
        policy = None if cfg.routing is None else routed_policy(cfg.routing, upstream, who)
        upstream["temperature"] = cfg.train_temperature if caller.mode == Mode.TRAIN else cfg.val_temperature
        if cfg.force_logprobs:  # completions take how many alternatives (at least 0), chat a flag
            completions = flavour.upstream_path == "/completions"
            upstream["logprobs"] = max(int(upstream.get("logprobs") or 0), 0) if completions else True
        upstream["return_token_ids"] = True
        trace_id, span_id = parse_traceparent(traceparent)
        cap = cfg.max_output_tokens
        record = CallRecord(
            rollout_id=caller.rollout_id,
            attempt=caller.attempt,
            flavour=flavour.kind,
            request=body if cap is None else capped(upstream, body, cap, flavour.upstream_path),
            trace_id=trace_id,
            span_id=span_id,
            streamed=bool(upstream.get("stream")),
            policy_version=await self.gw.served_version(),
            started=time.perf_counter(),
            policy=policy,
        )
        return Call(flavour, body, upstream, record, time.monotonic() + cfg.upstream_timeout_s)

    async def _forward(self, call: Call, caller: CallerAttempt) -> Reply:
        """Send to the upstream, then relay its stream or answer from its body; every outcome is recorded."""
        record, anthropic = call.record, call.flavour.anthropic_errors
        agent_model = call.upstream.get("model")

        async def payload(target: Target) -> dict[str, Any]:
            # Several policies: the routed one is the model name upstream.
            model = record.policy or await self.gw.upstreams.model_name(target) or agent_model
            return {**call.upstream, "model": model}

        try:
            targets = await self.gw.upstreams.route(f"{caller.rollout_id}/{caller.attempt}", record.policy_version)
            targets = self.gw.limits.upstream_targets(targets, caller)
            if isinstance(targets, Refusal):  # none under its upstream's rate limit: a 429, recorded as an upstream's
                raise targets.error(anthropic)
            path = call.flavour.upstream_path
            target, resp = await self.gw.proxy.send(targets, path, payload, call.deadline, stream=record.streamed)
        except GatewayError as exc:
            return await self.gw.recorder.failed(record, exc, anthropic)
        record.upstream = target.id
        if resp.status != 200:
            status = resp.status if 400 <= resp.status < 500 else 502
            exc = GatewayError(status, f"upstream {target.id} answered {resp.status}: {_upstream_message(resp)}")
            return await self.gw.recorder.failed(record, exc, anthropic)
        if record.streamed:
            relay = StreamRelay(call.flavour, call.flavour.stream(call.body), record, resp, self.gw, call.deadline)
            return Reply(200, content_type=EVENT_STREAM, stream=relay.events(), release=relay.release)
        try:
            tokens, agent_body = self._read_answer(call, resp)
        except GatewayError as exc:  # the upstream's body is not what it should be
            return await self.gw.recorder.failed(record, exc, anthropic)
        await self.gw.recorder.record(record, status=200, response=agent_body, tokens=tokens)
        return Reply(200, orjson.dumps(agent_body))

    @staticmethod
    def _read_answer(call: Call, resp: UpstreamReply) -> tuple[Tokens, dict[str, Any]]:
        """A non-streamed answer's tokens, and the body the agent gets; 502 if the upstream's is malformed."""
        upstream_id, path = call.record.upstream, call.flavour.upstream_path
        try:
            upstream = orjson.loads(resp.body)
            if not isinstance(upstream, dict) or not isinstance(upstream.get("choices"), list):
                raise ValueError("no `choices` list")
        except (orjson.JSONDecodeError, ValueError) as exc:
            detail = (
                f"upstream {upstream_id} returned a body that is not an OpenAI response ({exc}): {resp.text(200)!r}"
            )
            raise GatewayError(502, detail) from None
        try:
            return tokens_of(upstream, chat=path != "/completions"), call.flavour.from_upstream(upstream, call.body)
        except (TypeError, AttributeError, KeyError, ValueError) as exc:
            raise GatewayError(502, f"upstream {upstream_id} returned a malformed {path} response ({exc!r})") from None
