"""Store hot path: how fast the gateway can record model calls, against a bare sqlite3 insert.

    .venv/bin/python benchmarks/store.py [--calls 2000] [--pg postgresql+psycopg://...]

Baseline: one INSERT of the same JSON columns per call through the stdlib
sqlite3 module, committed each time, WAL + synchronous=NORMAL (the least any
durable store must do). SqlStore additionally locks the rollout row, assigns
the call's seq and goes through SQLAlchemy. Prints calls/s and the ratio.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from record import record

from alight.schemas import ApiFlavour, ModelCall, RolloutCreate
from alight_server.store.sql import SqlStore

PROMPT = list(range(1500))  # a long-ish agent prompt, token ids
RESPONSE = list(range(300))
LOGPROBS = [-0.123456] * 300


def call(i: int) -> ModelCall:
    return ModelCall(
        id=f"c{i}",
        rollout_id="bench",
        attempt=1,
        seq=-1,
        flavour=ApiFlavour.CHAT,
        request={"messages": [{"role": "user", "content": "x" * 2000}]},
        response={"choices": [{"message": {"content": "y" * 800}}]},
        prompt_token_ids=PROMPT,
        response_token_ids=RESPONSE,
        response_logprobs=LOGPROBS,
        status_code=200,
        created_at=datetime.now(UTC),
    )


def bench_baseline(path: Path, n: int) -> float:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE calls (id TEXT PRIMARY KEY, request TEXT, response TEXT, p TEXT, r TEXT, l TEXT)")
    calls = [call(i) for i in range(n)]
    start = time.perf_counter()
    for c in calls:
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "INSERT INTO calls VALUES (?, ?, ?, ?, ?, ?)",
            (
                c.id,
                json.dumps(c.request),
                json.dumps(c.response),
                json.dumps(c.prompt_token_ids),
                json.dumps(c.response_token_ids),
                json.dumps(c.response_logprobs),
            ),
        )
        db.execute("COMMIT")
    elapsed = time.perf_counter() - start
    db.close()
    return n / elapsed


def bench_store(url: str, n: int) -> float:
    store = SqlStore(url)
    store.create_rollouts([RolloutCreate(id="bench")])
    calls = [call(i) for i in range(n)]
    start = time.perf_counter()
    for c in calls:
        store.add_model_call(c)
    elapsed = time.perf_counter() - start
    assert store.list_model_calls("bench")[-1].seq == n - 1
    store.close()
    return n / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description="Store hot path: model calls recorded per second.")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--pg", help="also measure this PostgreSQL URL (an empty database)")
    parser.add_argument(
        "--record", action="store_true", help="append the result to benchmarks/results.jsonl (benchmarks/record.py)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = bench_baseline(Path(tmp) / "base.db", args.calls)
        sqlite_rate = bench_store(f"sqlite:///{tmp}/store.db", args.calls)
    print(f"baseline sqlite3 insert+commit : {base:8.0f} calls/s")
    rates = {"SQLite": sqlite_rate}
    if args.pg:
        rates["PostgreSQL"] = bench_store(args.pg, args.calls)
    for name, rate in rates.items():
        print(f"SqlStore on {name:<19}: {rate:8.0f} calls/s  ({rate / base:.2f}x baseline)")
    if args.record:
        what = f"store, model calls with a 1,500-token prompt, one commit each, {args.calls} calls"
        baseline = f"a bare sqlite3 insert+commit of the same columns ({base:.0f} calls/s)"
        for name, rate in rates.items():
            record("store", f"{what}, {name}", f"{rate:.0f} calls/s, {rate / base:.2f}x {baseline}")


if __name__ == "__main__":
    main()
