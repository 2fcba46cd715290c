"""Export a run's quickstart trajectories as OpenTelemetry GenAI spans, text only: the traces a team's
observability stack would hold (no token ids, no logprobs), for `alight data import --format otel`.

Each rollout becomes one trace, written by the OpenTelemetry SDK and encoded by its own OTLP encoder
(`trace.pb`, an ExportTraceServiceRequest): a root span `invoke_agent quickstart` carrying the agent's reward
as an `alight.reward` event, and one `chat` span per model call with the current semantic conventions'
`gen_ai.input.messages` / `gen_ai.output.messages` (messages of typed parts), nothing else of the call.

    python export_otel.py --db sqlite:///runs/traces-gen/alight.db --out traces.pb [--mode val]

The store is opened with ALIGHT_SECRET_KEY (or --admin-key: the run's, from its stack.json).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from alight import semconv
from alight.api_models import RolloutQuery
from alight.schemas import Mode, RolloutState, Trajectory
from alight_server.store import open_store
from alight_server.store.keys.kek import KekSource
from alight_server.trajectories.call_output import call_output
from alight_server.trajectories.join import build_trajectory


def parts(message: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat message as a GenAI semantic-conventions message: role and typed parts."""
    return {"role": message["role"], "parts": [{"type": "text", "content": str(message.get("content") or "")}]}


def write_trace(tracer: Tracer, trajectory: Trajectory, start_ns: int) -> None:
    root = tracer.start_span("invoke_agent quickstart", start_time=start_ns)
    for tc in trajectory.calls:
        request_messages = tc.call.request.get("messages") or []
        output = call_output(tc.call)
        attributes = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
            semconv.GEN_AI_REQUEST_MODEL: str(tc.call.request.get("model")),
            "gen_ai.input.messages": json.dumps([parts(m) for m in request_messages]),
            "gen_ai.output.messages": json.dumps(
                [{**parts({"role": "assistant", "content": output.text}), "finish_reason": output.finish_reason}]
            ),
        }
        start_ns += 1_000_000
        name = f"chat {tc.call.request.get('model')}"
        span = tracer.start_span(name, trace.set_span_in_context(root), attributes=attributes, start_time=start_ns)
        span.end(end_time=start_ns + 500_000)
    if trajectory.final_reward is not None:
        root.add_event(
            semconv.EVENT_REWARD,
            {semconv.ATTR_REWARD_VALUE: trajectory.final_reward, semconv.ATTR_REWARD_FINAL: True},
        )
    root.end(end_time=start_ns + 1_000_000)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--db", required=True, help="the run's store, sqlite:///RUN/alight.db")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--mode", choices=[m.value for m in Mode], default=None, help="only rollouts of this mode")
    parser.add_argument("--admin-key", default=None)
    args = parser.parse_args()

    store = open_store(args.db, KekSource.default(args.admin_key))
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("quickstart-traces")
    query, written = RolloutQuery(limit=1000, state=[RolloutState.SUCCEEDED]), 0
    while page := store.list_rollouts(query):
        for rollout in page:
            if args.mode is None or rollout.mode.value == args.mode:
                write_trace(tracer, build_trajectory(store, rollout.id), 1_700_000_000_000_000_000 + written * 10**9)
                written += 1
        query = query.model_copy(update={"since_seq": page[-1].seq})
    store.close()
    args.out.write_bytes(encode_spans(exporter.get_finished_spans()).SerializeToString())
    print(f"{written} traces, {len(exporter.get_finished_spans())} spans -> {args.out}")


if __name__ == "__main__":
    main()
