"""Gateway capture path alone: a worker-thread hop per call vs the group-commit capture writer, in one run.

    .venv/bin/python benchmarks/gateway_capture.py [--calls 2000] [--repeats 2]

Both write the same 32-token chat ModelCalls durably into one SQLite store
from an event loop, with 1 and with 16 concurrent callers: `hop` is
`anyio.to_thread.run_sync(store.add_model_call, call)` per call (what the
gateway did before), `writer` is `CaptureWriter.write` (one thread, one
transaction per queued group). Prints calls/s, wall and process CPU per
call, and the writer/hop ratios. CPU per call is the steadier number on a
shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from datetime import UTC, datetime

import anyio.to_thread
from record import record

from alight.schemas import ApiFlavour, ModelCall, RolloutCreate
from alight_server.gateway.capture.writer import CaptureWriter
from alight_server.store.sql import SqlStore


def _call(rollout_id: str) -> ModelCall:
    ids = list(range(1000, 1032))
    response = {"choices": [{"message": {"content": " w" * 32}, "logprobs": {"content": [{"logprob": -0.5}] * 32}}]}
    return ModelCall.model_construct(
        id=uuid.uuid4().hex,
        rollout_id=rollout_id,
        attempt=1,
        seq=0,
        trace_id=None,
        span_id=None,
        flavour=ApiFlavour.CHAT,
        request={"model": "m", "messages": [{"role": "user", "content": "benchmark me " * 8}]},
        response=response,
        prompt_token_ids=list(range(64)),
        response_token_ids=ids,
        response_logprobs=[-0.5] * len(ids),
        extra_choices=[],
        policy_version=0,
        upstream="u",
        latency_ms=1.0,
        status_code=200,
        error=None,
        streamed=False,
        flags=[],
        created_at=datetime.now(UTC),
    )


async def _run(mode: str, store: SqlStore, rollouts: list[str], calls: int, concurrency: int) -> tuple[float, float]:
    writer = CaptureWriter(store)

    async def caller(rollout_id: str) -> None:
        for _ in range(calls // concurrency):
            call = _call(rollout_id)
            if mode == "hop":
                await anyio.to_thread.run_sync(store.add_model_call, call)
            else:
                await writer.write(call)

    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(caller(rollouts[i % len(rollouts)]) for i in range(concurrency)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    writer.close()
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description="Gateway capture path: worker-thread hop vs group-commit writer.")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--record", action="store_true", help="append the result to benchmarks/results.jsonl (benchmarks/record.py)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = SqlStore(f"sqlite:///{tmp}/capture.db")
        rollouts = [r.id for r in store.create_rollouts([RolloutCreate() for _ in range(16)])]
        print(f"capture path: {args.calls} calls per phase, SQLite (WAL, synchronous=NORMAL)")
        ratios: dict[int, str] = {}
        for concurrency in (1, 16):
            best: dict[str, tuple[float, float]] = {}
            for _ in range(args.repeats):
                for mode in ("hop", "writer"):
                    wall, cpu = asyncio.run(_run(mode, store, rollouts, args.calls, concurrency))
                    per = (wall / args.calls * 1e3, cpu / args.calls * 1e3)
                    best[mode] = min(best.get(mode, per), per)
                    print(
                        f"  {concurrency:2d} callers {mode:6s} {args.calls / wall:7.0f} calls/s  "
                        f"{per[0]:.3f} ms wall/call  {per[1]:.3f} ms cpu/call"
                    )
            hop, writer = best["hop"], best["writer"]
            ratios[concurrency] = f"writer/hop wall {writer[0] / hop[0]:.2f}x, cpu {writer[1] / hop[1]:.2f}x"
            print(f"  {concurrency:2d} callers, best of {args.repeats}: {ratios[concurrency]} (lower is better)")
        store.close()
    if args.record:
        for concurrency, ratio in ratios.items():
            record(
                "gateway-capture",
                f"capture path alone, {concurrency} concurrent caller(s), {args.calls} calls per phase, "
                f"best of {args.repeats}",
                f"{ratio} (the group-commit writer against a thread hop per call; lower is better)",
            )


if __name__ == "__main__":
    main()
