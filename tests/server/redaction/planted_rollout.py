"""A finished rollout of a training run carrying the planted secrets in a prompt, a tool result and a log line.

Written straight into a store as the gateway, the OTLP ingest and the controller would have written it:
two chat calls (the first asks for a tool, the second reads its result), their token ids from the
built-in `tiny` model's tokenizer (the run's model, so the token view decodes them), a tool span whose
result is the secrets, the attempt's uploaded log, and a final reward.
"""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from typing import Any

from alight import semconv
from alight.attempt_logs import LOG_EVENT_KIND
from alight.schemas import (
    ApiFlavour,
    AttemptFinish,
    EventCreate,
    ModelCall,
    RewardCreate,
    RolloutCreate,
    RunReport,
    SpanRecord,
)
from alight_server.store import Store
from tests.server.redaction.planted import BLOCK, SECRETS

RUN = "redrun"
ROLLOUT = f"{RUN}-s00000-t000-k00"
CLEAN = f"{RUN}-s00000-t001-k00"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TOOL_CALL_ID = "call_Xj3kL9mN2pQ8rS5tU7vW1yZ4"  # as OpenAI spells them: random-looking, and no secret
CODE = """def tokenize(text: str, max_length: int = 4096) -> list[int]:
    ids = tokenizer.encode(text, add_special_tokens=False)[:max_length]
    return ids  # e.g. [151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30]
"""


@functools.lru_cache(maxsize=1)
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    from alight_server.inference.models import resolve_model

    return AutoTokenizer.from_pretrained(str(resolve_model("tiny")))


def _encode(text: str) -> list[int]:
    return list(tokenizer().encode(text, add_special_tokens=False))


def _call(rollout_id: str, seq: int, request: dict[str, Any], prompt: list[int], reply: dict[str, Any]) -> ModelCall:
    answer = reply.get("content") or json.dumps([tc["function"] for tc in reply.get("tool_calls", [])])
    response_ids = _encode(answer)
    response = {
        "id": f"chatcmpl-9f8Kx2LmQ7rT4vW8yZ1bN{seq}",
        "choices": [{"index": 0, "message": {"role": "assistant", **reply}, "finish_reason": "stop"}],
    }
    return ModelCall(
        id=f"{rollout_id}-1-{seq}",
        rollout_id=rollout_id,
        attempt=1,
        seq=seq,
        trace_id=TRACE,
        flavour=ApiFlavour.CHAT,
        request=request,
        response=response,
        prompt_token_ids=prompt,
        response_token_ids=response_ids,
        response_logprobs=[-0.25] * len(response_ids),
        policy_version=0,
        status_code=200,
        created_at=datetime.now(UTC),
    )


def plant_rollout(store: Store, rollout_id: str, content: str) -> None:
    """One finished attempt whose prompt, tool result and log all hold `content`."""
    store.create_rollouts(
        [RolloutCreate(id=rollout_id, task={"ask": content}, group_id=rollout_id[:-4], metadata={"step": 0})]
    )
    ((_, attempt),) = store.claim_attempts(1, ids=[rollout_id])
    tool_call = {"id": TOOL_CALL_ID, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    first = [{"role": "user", "content": f"Deploy with these settings:\n{content}"}]
    prompt0 = _encode(f"user: Deploy with these settings:\n{content}\nassistant: ")
    call0 = _call(rollout_id, 0, {"model": "policy", "messages": first}, prompt0, {"tool_calls": [tool_call]})
    tool_turn = [{"role": "tool", "tool_call_id": TOOL_CALL_ID, "content": content}]
    second = [*first, {"role": "assistant", "tool_calls": [tool_call]}, *tool_turn]
    prompt1 = [*prompt0, *call0.response_token_ids, *_encode(f"\ntool: {content}\nassistant: ")]
    call1 = _call(rollout_id, 1, {"model": "policy", "messages": second}, prompt1, {"content": "Deployed."})
    store.add_model_calls([call0, call1])
    now = datetime.now(UTC).timestamp()
    span = SpanRecord(
        trace_id=TRACE,
        span_id="00f067aa0ba902b7",
        rollout_id=rollout_id,
        attempt=attempt,
        name=f"{semconv.OP_EXECUTE_TOOL} read_file",
        start_time_ns=int(now * 1e9),
        end_time_ns=int(now * 1e9) + 1000,
        attributes={
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_EXECUTE_TOOL,
            semconv.GEN_AI_TOOL_NAME: "read_file",
            semconv.GEN_AI_TOOL_CALL_ARGUMENTS: '{"path": "deploy.env"}',
            semconv.GEN_AI_TOOL_CALL_RESULT: content,
        },
    )
    store.add_spans([span])
    log = f"agent: reading deploy.env\n{content}\nagent: done\n"
    store.add_event(rollout_id, EventCreate(kind=LOG_EVENT_KIND, attempt=attempt, payload={"text": log}))
    store.add_reward(rollout_id, RewardCreate(value=1.0, attempt=attempt, final=True))
    store.finish_attempt(rollout_id, attempt, AttemptFinish(status="succeeded", exit_code=0))


def plant_run(store: Store) -> None:
    """The run (its model `tiny`), the rollout with every planted secret, and a clean rollout of code."""
    store.report_run(RunReport(id=RUN, config={"model": "tiny"}))
    plant_rollout(store, ROLLOUT, BLOCK)
    plant_rollout(store, CLEAN, CODE)


assert all(value in BLOCK for value in SECRETS.values() if value not in ("",))
