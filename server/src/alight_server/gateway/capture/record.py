"""What a model call leaves behind: token ids, logprobs and metadata, as a ModelCall row."""

from __future__ import annotations

import copy
import itertools
import os
import re
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from alight.schemas import ApiFlavour, ModelCall
from alight_server.policies.routing import POLICY_FLAG

# Flags on a captured call: kept for people, skipped by trainers.
MISSING_PROMPT_IDS = "missing_prompt_token_ids"
MISSING_TOKEN_IDS = "missing_token_ids"
MISSING_LOGPROBS = "missing_logprobs"
LOGPROB_COUNT_MISMATCH = "logprob_count_mismatch"
USAGE_COUNT_MISMATCH = "usage_count_mismatch"
# Still running when new weights were loaded (a drain that timed out): served by two policy versions.
SPANNED_WEIGHT_UPDATE = "spanned_weight_update"


class _CallIds:
    """Unique call ids without a syscall per call: a random per-process prefix and a counter.

    32 hex characters like a uuid4 hex; a forked child draws its own prefix.
    """

    def __init__(self) -> None:
        self.reset()
        os.register_at_fork(after_in_child=self.reset)

    def reset(self) -> None:
        self.prefix = os.urandom(8).hex()
        self.counter = itertools.count()

    def next(self) -> str:
        return f"{self.prefix}{next(self.counter):016x}"


_call_ids = _CallIds()
# Every field set; `to_model_call` copies it and fills in one call's values.
_BLANK = ModelCall.model_construct(**dict.fromkeys(ModelCall.model_fields))

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")


def parse_traceparent(header: str | None) -> tuple[str | None, str | None]:
    """(trace id, span id) of the W3C `traceparent` header; (None, None) when absent or malformed."""
    match = _TRACEPARENT.match(header.strip().lower()) if header else None
    if not match or set(match.group(1)) == {"0"} or set(match.group(2)) == {"0"}:
        return None, None
    return match.group(1), match.group(2)


@dataclass
class Tokens:
    prompt_token_ids: list[int] = field(default_factory=list)
    response_token_ids: list[int] = field(default_factory=list)
    response_logprobs: list[float] = field(default_factory=list)
    extra_choices: list[dict[str, Any]] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)


def _choice_logprobs(choice: dict[str, Any], chat: bool) -> list[float] | None:
    lp = choice.get("logprobs")
    if not isinstance(lp, dict):
        return None
    if chat:
        content = lp.get("content")
        return None if content is None else [float(e["logprob"]) for e in content]
    values = lp.get("token_logprobs")
    return None if values is None else [float(v) if v is not None else 0.0 for v in values]


def tokens_of(response: dict[str, Any], chat: bool) -> Tokens:
    """Token ids and logprobs of a vLLM-shaped chat or completions response (streamed ones assembled first)."""
    out = Tokens()
    choices = sorted(response.get("choices") or [], key=lambda c: c.get("index", 0))
    prompt = response.get("prompt_token_ids") if chat else (choices[0].get("prompt_token_ids") if choices else None)
    if prompt is None:
        out.flags.append(MISSING_PROMPT_IDS)
    else:
        out.prompt_token_ids = list(prompt)
    flags: set[str] = set()
    total = 0
    for i, choice in enumerate(choices):
        ids = choice.get("token_ids")
        logprobs = _choice_logprobs(choice, chat)
        if ids is None:
            flags.add(MISSING_TOKEN_IDS)
        if logprobs is None:
            flags.add(MISSING_LOGPROBS)
        elif ids is not None and len(logprobs) != len(ids):
            flags.add(LOGPROB_COUNT_MISMATCH)
        total += len(ids or [])
        if i == 0:
            out.response_token_ids, out.response_logprobs = list(ids or []), logprobs or []
        else:
            out.extra_choices.append(
                {"index": choice.get("index", i), "token_ids": ids or [], "logprobs": logprobs or []}
            )
    usage = response.get("usage") or {}
    if MISSING_TOKEN_IDS not in flags and usage.get("completion_tokens") not in (None, total):
        flags.add(USAGE_COUNT_MISMATCH)
    out.flags.extend(sorted(flags))
    return out


@dataclass
class CallRecord:
    """Everything known about a call when it is recorded; `to_model_call` makes the row."""

    rollout_id: str
    attempt: int
    flavour: ApiFlavour
    request: dict[str, Any]
    trace_id: str | None
    span_id: str | None
    streamed: bool
    policy_version: int
    started: float
    upstream: str | None = None
    recorded: bool = False  # a row for this call went to the store (client_gone must not add a second)
    policy: str | None = None  # several policies: the one that served it, recorded as the flag policy:<name>

    def to_model_call(
        self,
        *,
        status: int,
        latency_ms: float,
        response: dict[str, Any] | None = None,
        tokens: Tokens | None = None,
        error: str | None = None,
    ) -> ModelCall:
        t = tokens or Tokens()
        # Built from values the gateway produced itself, so validation is skipped: a copy of a
        # constructed row with every field replaced (model_construct walks each field; hot path).
        call = copy.copy(_BLANK)
        row, record, token_fields = vars(call), vars(self), vars(t)
        row.update({name: record[name] for name in _FROM_RECORD})
        row.update({name: token_fields[name] for name in _FROM_TOKENS})
        row.update(
            id=_call_ids.next(),
            seq=0,  # the store assigns the attempt's next number
            response=response,
            latency_ms=latency_ms,
            status_code=status,
            error=error,
            created_at=datetime.now(UTC),
        )
        if self.policy is not None:
            row["flags"] = sorted({*t.flags, POLICY_FLAG + self.policy})
        return call


def _model_call_fields(cls: type) -> tuple[str, ...]:
    """The fields of a dataclass that are ModelCall fields of the same name: copied into the row by name."""
    return tuple(f.name for f in fields(cls) if f.name in ModelCall.model_fields)


_FROM_RECORD = _model_call_fields(CallRecord)  # rollout_id, attempt, flavour, request, trace_id, ...
_FROM_TOKENS = _model_call_fields(Tokens)  # the token ids, logprobs, extra choices and flags
