"""Conversions between stored rows and the shared schemas (JSON columns, UTC timestamps)."""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import Row

from alight.schemas import (
    Attempt,
    Event,
    ModelCall,
    PolicyVersion,
    Reward,
    Rollout,
    RolloutCreate,
    RunnerSpec,
    SpanRecord,
    Upstream,
)
from alight_server.store.base import InvalidValue


def now() -> datetime:
    return datetime.now(UTC)


def dumps(value: Any, what: str = "value") -> str:
    """Compact JSON of what a client sent; NaN and infinities are refused, not silently nulled."""
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        raise InvalidValue(f"{what} holds NaN or an infinity, which JSON cannot carry; send a finite number") from exc


def dumps_recorded(value: Any) -> str:
    """Compact JSON of what the gateway recorded: a -inf logprob is data and is kept as -Infinity.

    orjson (several times faster than the stdlib on the capture hot path) writes a
    non-finite float as null, so a value whose encoding holds a null is checked for
    one and, only then, encoded by the stdlib, which keeps it.
    """
    try:
        text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):  # an int beyond 64 bits, a type orjson does not know
        return json.dumps(value, separators=(",", ":"))
    if b"null" in text and _has_non_finite(value):
        return json.dumps(value, separators=(",", ":"))
    return text.decode()


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_non_finite(v) for v in value)
    return False


def loads(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # -Infinity, NaN: valid for the stdlib, which wrote them
        return json.loads(text)


def utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything stored is UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def body_hash(item: RolloutCreate) -> str:
    body = item.model_dump(mode="json", exclude={"id"})
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def attempt_from_row(row: Row[Any]) -> Attempt:
    m = row._mapping
    return Attempt(
        rollout_id=m["rollout_id"],
        attempt=m["attempt"],
        status=m["status"],
        failure_kind=m["failure_kind"],
        message=m["message"],
        exit_code=m["exit_code"],
        runner_handle=m["runner_handle"],
        started_at=utc(m["started_at"]),
        ended_at=utc(m["ended_at"]) if m["ended_at"] is not None else None,
    )


def rollout_from_row(row: Row[Any], attempts: list[Attempt]) -> Rollout:
    m = row._mapping
    runner = loads(m["runner"])
    return Rollout(
        id=m["id"],
        task=loads(m["task"]),
        mode=m["mode"],
        group_id=m["group_id"],
        runner=RunnerSpec.model_validate(runner) if runner is not None else None,
        timeout_s=m["timeout_s"],
        max_attempts=m["max_attempts"],
        metadata=loads(m["metadata"]),
        state=m["state"],
        policy_version=m["policy_version"],
        created_at=utc(m["created_at"]),
        updated_at=utc(m["updated_at"]),
        seq=m["seq"],
        attempts=attempts,
    )


def rollout_values(item: RolloutCreate, rollout_id: str, policy_version: int, ordinal: int, seq: int) -> dict[str, Any]:
    ts = now()
    return {
        "id": rollout_id,
        "ordinal": ordinal,
        "task": dumps(item.task, "task"),
        "mode": item.mode.value,
        "group_id": item.group_id,
        "runner": dumps(item.runner.model_dump(mode="json")) if item.runner is not None else None,
        "timeout_s": item.timeout_s,
        "max_attempts": item.max_attempts,
        "metadata": dumps(item.metadata, "metadata"),
        "state": "queued",
        "policy_version": policy_version,
        "created_at": ts,
        "updated_at": ts,
        "seq": seq,
        "claimable": True,
        "attempt_count": 0,
        "body_hash": body_hash(item),
    }


def event_from_row(row: Row[Any]) -> Event:
    m = row._mapping
    return Event(
        id=m["id"],
        rollout_id=m["rollout_id"],
        attempt=m["attempt"],
        kind=m["kind"],
        payload=loads(m["payload"]),
        created_at=utc(m["created_at"]),
    )


def reward_from_row(row: Row[Any]) -> Reward:
    m = row._mapping
    return Reward(
        id=m["id"],
        rollout_id=m["rollout_id"],
        attempt=m["attempt"],
        value=m["value"],
        name=m["name"],
        final=m["final"],
        span_id=m["span_id"],
        model_call_id=m["model_call_id"],
        source=m["source"],
        created_at=utc(m["created_at"]),
    )


def model_call_values(call: ModelCall, seq: int) -> dict[str, Any]:
    return {
        "id": call.id,
        "rollout_id": call.rollout_id,
        "attempt": call.attempt,
        "seq": seq,
        "trace_id": call.trace_id,
        "span_id": call.span_id,
        "flavour": call.flavour.value,
        "request": dumps_recorded(call.request),
        "response": dumps_recorded(call.response) if call.response is not None else None,
        "prompt_token_ids": dumps_recorded(call.prompt_token_ids),
        "response_token_ids": dumps_recorded(call.response_token_ids),
        "response_logprobs": dumps_recorded(call.response_logprobs),
        "extra_choices": dumps_recorded(call.extra_choices),
        "policy_version": call.policy_version,
        "upstream": call.upstream,
        "latency_ms": call.latency_ms,
        "status_code": call.status_code,
        "error": call.error,
        "streamed": call.streamed,
        "flags": dumps_recorded(call.flags),
        "created_at": call.created_at,
    }


def model_call_from_row(row: Row[Any]) -> ModelCall:
    m = row._mapping
    return ModelCall(
        id=m["id"],
        rollout_id=m["rollout_id"],
        attempt=m["attempt"],
        seq=m["seq"],
        trace_id=m["trace_id"],
        span_id=m["span_id"],
        flavour=m["flavour"],
        request=loads(m["request"]),
        response=loads(m["response"]),
        prompt_token_ids=loads(m["prompt_token_ids"]),
        response_token_ids=loads(m["response_token_ids"]),
        response_logprobs=loads(m["response_logprobs"]),
        extra_choices=loads(m["extra_choices"]),
        policy_version=m["policy_version"],
        upstream=m["upstream"],
        latency_ms=m["latency_ms"],
        status_code=m["status_code"],
        error=m["error"],
        streamed=m["streamed"],
        flags=loads(m["flags"]),
        created_at=utc(m["created_at"]),
    )


def span_values(span: SpanRecord) -> dict[str, Any]:
    values = span.model_dump()
    values["attributes"] = dumps_recorded(span.attributes)
    values["events"] = dumps_recorded(span.events)
    return values


def span_from_row(row: Row[Any]) -> SpanRecord:
    values = dict(row._mapping)
    values["attributes"] = loads(values["attributes"])
    values["events"] = loads(values["events"])
    return SpanRecord.model_validate(values)


def upstream_from_row(row: Row[Any]) -> Upstream:
    m = row._mapping
    return Upstream(
        id=m["id"],
        url=m["url"],
        policy_version=m["policy_version"],
        model=m["model"],
        api_key=m["api_key"],
        created_at=utc(m["created_at"]),
    )


def policy_version_from_row(row: Row[Any]) -> PolicyVersion:
    m = row._mapping
    return PolicyVersion(version=m["version"], metadata=loads(m["metadata"]), created_at=utc(m["created_at"]))
