"""OTLP/HTTP trace ingest at /v1/traces: an attempt's spans, and the rewards they carry as events."""

from __future__ import annotations

import base64
import json
import math
import zlib
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from starlette.concurrency import run_in_threadpool

from alight import semconv
from alight.schemas import RewardCreate, RewardSource, SpanRecord
from alight_server.http.auth import AttemptClaims
from alight_server.http.deps import AttemptTokenDep, ConfigDep, StoreDep
from alight_server.http.json_depth import check_raw_depth
from alight_server.store.base import NotFound, Store

router = APIRouter()

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


@dataclass
class Batch:
    spans: list[SpanRecord]
    rewards: list[RewardCreate]


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, gunzipped, refusing more than `limit` bytes before or after decompression."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"OTLP body of {declared} bytes exceeds the limit of {limit}; export smaller batches")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(413, f"OTLP body exceeds the limit of {limit} bytes; export smaller batches")
        chunks.append(chunk)
    body = b"".join(chunks)
    encoding = request.headers.get("content-encoding", "identity").lower().strip()
    if encoding == "gzip":
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            body = inflater.decompress(body, limit + 1)
        except zlib.error as exc:
            raise HTTPException(400, f"Content-Encoding is gzip but the body is not valid gzip: {exc}") from exc
        if len(body) > limit or inflater.unconsumed_tail:
            raise HTTPException(413, f"gzip OTLP body inflates past the limit of {limit} bytes")
    elif encoding not in ("identity", ""):
        raise HTTPException(415, f"Content-Encoding {encoding!r} is not supported; use gzip or none")
    return body


def _hex_ids_to_base64(payload: Any) -> None:
    """OTLP/JSON writes trace and span ids as hex; protobuf's JSON mapping expects base64."""
    if not isinstance(payload, dict):
        raise ValueError("OTLP JSON body must be an object with 'resourceSpans'")
    for resource_spans in payload.get("resourceSpans") or []:
        for scope_spans in resource_spans.get("scopeSpans") or []:
            for span in scope_spans.get("spans") or []:
                for holder in [span, *(span.get("links") or [])]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        value = holder.get(key)
                        if isinstance(value, str) and value:
                            holder[key] = base64.b64encode(bytes.fromhex(value)).decode()


def parse_request(body: bytes, content_type: str) -> ExportTraceServiceRequest:
    message = ExportTraceServiceRequest()
    media = content_type.split(";")[0].strip().lower()
    try:
        if media == PROTOBUF:
            message.ParseFromString(body)
        elif media == JSON:
            check_raw_depth(body, "the OTLP JSON body")  # json and protobuf's JSON parser recurse per level
            payload = json.loads(body)
            _hex_ids_to_base64(payload)
            json_format.ParseDict(payload, message, ignore_unknown_fields=True)
        else:
            raise HTTPException(415, f"Content-Type {media!r} is not OTLP; send {PROTOBUF} or {JSON}")
    except (DecodeError, json_format.ParseError, ValueError, TypeError, AttributeError) as exc:
        raise HTTPException(400, f"malformed OTLP {media} body: {exc}") from exc
    return message


def any_value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return attributes(value.kvlist_value.values)
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which)


def attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in pairs if isinstance(kv, KeyValue)}


def _check_identity(resource: dict[str, Any], claims: AttemptClaims) -> None:
    """Resource attributes, when present, must name the token's own rollout and attempt."""
    rollout_id = resource.get(semconv.RESOURCE_ROLLOUT_ID)
    attempt = resource.get(semconv.RESOURCE_ATTEMPT)
    if rollout_id is not None and str(rollout_id) != claims.rollout_id:
        raise HTTPException(
            403, f"spans are for rollout {rollout_id!r} but the token is for rollout {claims.rollout_id!r}"
        )
    if attempt is not None and str(attempt) != str(claims.attempt):
        raise HTTPException(
            403,
            f"spans are for attempt {attempt!r} but the token is for attempt {claims.attempt} of {claims.rollout_id!r}",
        )


def _reward(event: dict[str, Any], span: SpanRecord, index: int, claims: AttemptClaims) -> RewardCreate:
    attrs = event["attributes"]
    value = attrs.get(semconv.ATTR_REWARD_VALUE)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise HTTPException(
            400,
            f"span {span.span_id} ({span.name!r}) has an {semconv.EVENT_REWARD} event whose "
            f"{semconv.ATTR_REWARD_VALUE} is {value!r}; it must be a finite number",
        )
    name = attrs.get(semconv.ATTR_REWARD_NAME)
    call_id = attrs.get(semconv.ATTR_REWARD_MODEL_CALL_ID)
    return RewardCreate(
        id=f"otlp-{span.trace_id[:16]}-{span.span_id}-{index}",
        attempt=claims.attempt,
        value=float(value),
        name=None if name is None else str(name)[:200],
        final=bool(attrs.get(semconv.ATTR_REWARD_FINAL, False)),
        span_id=span.span_id,
        model_call_id=None if call_id is None else str(call_id),
        source=RewardSource.AGENT,
    )


def to_batch(message: ExportTraceServiceRequest, claims: AttemptClaims) -> Batch:
    """Spans and rewards of one export, checked whole before anything is stored."""
    batch = Batch(spans=[], rewards=[])
    for resource_spans in message.resource_spans:
        _check_identity(attributes(resource_spans.resource.attributes), claims)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                if len(span.trace_id) != 16 or len(span.span_id) != 8:
                    raise HTTPException(400, f"span {span.name!r} has a malformed trace or span id")
                events = [
                    {"name": e.name, "time_ns": e.time_unix_nano, "attributes": attributes(e.attributes)}
                    for e in span.events
                ]
                record = SpanRecord(
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex() or None,
                    rollout_id=claims.rollout_id,
                    attempt=claims.attempt,
                    name=span.name,
                    kind=span.kind,
                    start_time_ns=span.start_time_unix_nano,
                    end_time_ns=span.end_time_unix_nano or None,
                    attributes=attributes(span.attributes),
                    events=events,
                    status_code=span.status.code,
                    status_message=span.status.message or None,
                )
                batch.spans.append(record)
                batch.rewards += [
                    _reward(e, record, i, claims) for i, e in enumerate(events) if e["name"] == semconv.EVENT_REWARD
                ]
    return batch


def store_batch(store: Store, batch: Batch, rollout_id: str) -> None:
    """Spans, then rewards; a reward for an attempt that has ended raises AttemptEnded (409)."""
    store.get_rollout(rollout_id)  # NotFound -> 404 before anything is written
    if batch.spans:
        store.add_spans(batch.spans)
    for reward in batch.rewards:
        store.add_reward(rollout_id, reward, while_running=True)


@router.post("/v1/traces", tags=["otlp"], summary="OTLP/HTTP trace export (protobuf or JSON, optionally gzip)")
async def export_traces(request: Request, claims: AttemptTokenDep, store: StoreDep, config: ConfigDep) -> Response:
    """Authenticated by the attempt token (ALIGHT_TOKEN); spans may only name the token's own attempt."""
    body = await read_body(request, config.max_body_bytes)
    content_type = request.headers.get("content-type", PROTOBUF)
    batch = to_batch(parse_request(body, content_type), claims)
    try:
        await run_in_threadpool(store_batch, store, batch, claims.rollout_id)
    except NotFound as exc:
        raise HTTPException(404, f"rollout {claims.rollout_id!r} of this token does not exist: {exc}") from exc
    answer = ExportTraceServiceResponse()
    if content_type.split(";")[0].strip().lower() == JSON:
        return Response(json_format.MessageToJson(answer), media_type=JSON)
    return Response(answer.SerializeToString(), media_type=PROTOBUF)
