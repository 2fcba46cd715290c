"""What redaction costs a reader: one realistic coding-agent trajectory redacted for people, in one run.

    .venv/bin/python benchmarks/redaction.py [--calls 12] [--repeats 5]

The trajectory: `--calls` chat calls of an agent fixing a bug, each request carrying the whole
conversation so far (as agents send it), tool results that are this repository's own source files
(4-10 KB each), halfway an `.env` file with four secrets and an email (so every later request carries
them), and a tool span per tool call. Redaction runs only
on read routes (the trajectory API, the dashboard, the CLI), never in the gateway's capture path.

Prints, per trajectory and per KB of content (the JSON of bodies, tool arguments/results and task):
- `read from store`: the baseline a read pays anyway, the join of the attempt's calls from a SQLite
  store (build_trajectory, content unsealed), what the trajectory API and the dashboard do first;
- `serialize`: the trajectory's JSON (Trajectory.model_dump_json);
- `redact, no cache`: every string scanned, repeated conversation prefixes included;
- `redact, cold`: a fresh Redactor per trajectory (its per-text cache fills within the trajectory);
- `redact, warm`: the server's Redactor after a first read (the dashboard's reload);
and the cold/read ratio, an attempt log full of numbers, then each detector's share on the trajectory's distinct texts, then hostile
texts (repetitions that make a pattern backtrack) scanned in windows (the default) vs whole.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from alight.schemas import (
    ApiFlavour,
    AttemptFinish,
    CallOutput,
    Mode,
    ModelCall,
    RolloutCreate,
    RolloutState,
    ToolSpan,
    Trajectory,
    TrajectoryCall,
)
from alight_server.redaction import RedactionConfig, Redactor, redactor
from alight_server.redaction.detectors import finders
from alight_server.redaction.views import redact_trajectory
from alight_server.store.sql import SqlStore
from alight_server.trajectories.join import build_trajectory

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "server/src/alight_server").rglob("*.py"), key=lambda p: p.stat().st_size)
ENV_FILE = (
    "DATABASE_URL=postgresql://app:s3cr3t@db.internal:5432/app\n"
    "AWS_ACCESS_KEY_ID=AKIAQ3EXAMPLE7XK2PZD\n"
    "STRIPE_KEY=sk_live_4eC39HqLyjWDarjtT1zdp7dc\n"
    "SUPPORT_EMAIL=help@example.com\n"
)


def realistic_trajectory(calls: int) -> Trajectory:
    files = [p for p in SOURCES if 4000 <= p.stat().st_size <= 10000][:calls]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use read_file and run_tests; answer with a diff."},
        {"role": "user", "content": "The trajectory join drops tool spans after a retried call. Find and fix it."},
    ]
    joined: list[TrajectoryCall] = []
    tools: list[ToolSpan] = []
    created = datetime.now(UTC)
    for seq in range(calls):
        path = str(files[seq % len(files)].relative_to(ROOT)) if seq != calls // 2 else ".env"
        tool_call = {
            "id": f"call_{seq:02d}Xj3kL9mN2pQ8rS5tU7vW",
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": path})},
        }
        reply = {"role": "assistant", "content": f"Reading {path} next.", "tool_calls": [tool_call]}
        call = ModelCall(
            id=f"r-1-{seq}",
            rollout_id="r",
            attempt=1,
            seq=seq,
            flavour=ApiFlavour.CHAT,
            request={"model": "policy", "messages": list(messages), "tools": [{"type": "function"}]},
            response={
                "id": f"chatcmpl-{seq}",
                "choices": [{"index": 0, "message": reply, "finish_reason": "tool_calls"}],
            },
            prompt_token_ids=list(range(300 * (seq + 1))),
            response_token_ids=list(range(40)),
            response_logprobs=[-0.5] * 40,
            status_code=200,
            created_at=created,
        )
        joined.append(TrajectoryCall(call=call, output=CallOutput(text=reply["content"])))
        result = ENV_FILE if path == ".env" else (ROOT / path).read_text()
        tools.append(
            ToolSpan(
                span_id=f"{seq:016x}",
                name="execute_tool read_file",
                tool_name="read_file",
                arguments=tool_call["function"]["arguments"],
                result=result,
                start_time_ns=seq,
                after_call=seq,
            )
        )
        messages += [reply, {"role": "tool", "tool_call_id": tool_call["id"], "content": result}]
    return Trajectory(
        rollout_id="r",
        attempt=1,
        group_id="g",
        mode=Mode.TRAIN,
        state=RolloutState.SUCCEEDED,
        attempt_status=None,
        failure_kind=None,
        calls=joined,
        tool_spans=tools,
        rewards=[],
        final_reward=1.0,
        task={"issue": messages[1]["content"]},
    )


def stored(trajectory: Trajectory, db: Path) -> SqlStore:
    """The trajectory's rollout and calls in a SQLite store, as the gateway leaves them (content sealed)."""
    store = SqlStore(f"sqlite:///{db}")
    store.create_rollouts([RolloutCreate(id=trajectory.rollout_id, task=trajectory.task)])
    ((_, attempt),) = store.claim_attempts(1, ids=[trajectory.rollout_id])
    store.add_model_calls([c.call.model_copy(update={"attempt": attempt}) for c in trajectory.calls])
    store.finish_attempt(trajectory.rollout_id, attempt, AttemptFinish(status="succeeded", exit_code=0))
    return store


def content_kb(trajectory: Trajectory) -> float:
    parts = [[c.call.request, c.call.response, c.output.model_dump()] for c in trajectory.calls]
    parts += [[t.arguments, t.result] for t in trajectory.tool_spans]
    return len(json.dumps([parts, trajectory.task])) / 1024


def best_ms(fn: Callable[[], object], repeats: int) -> float:
    """The median of `repeats` runs (ms): steadier than the mean on a shared machine."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def training_log(lines: int) -> str:
    """A log full of numbers: the case where every phone-shaped run of digits has to be looked at."""
    return "".join(
        f"2026-12-03T06:45:{i % 60:02d}.123456 INFO step {i} loss=0.{i * 7919 % 10000:04d} kl=0.00{i % 97:02d} "
        f"tokens/s={1800 + i % 300}.7 rollout run7-s{i:05d}-t000-k00 attempt 1\n"
        for i in range(lines)
    )


def distinct_texts(value: Any, out: set[str]) -> set[str]:
    if isinstance(value, str):
        out.add(value)
    elif isinstance(value, dict):
        for v in value.values():  # pyright: ignore[reportUnknownVariableType]
            distinct_texts(v, out)
    elif isinstance(value, list):
        for v in value:  # pyright: ignore[reportUnknownVariableType]
            distinct_texts(v, out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--hostile-kb", type=int, default=64, help="size of each hostile text (0: skip them)")
    args = parser.parse_args()
    trajectory = realistic_trajectory(args.calls)
    kb = content_kb(trajectory)
    warm = Redactor()
    redact_trajectory(warm, trajectory)
    with tempfile.TemporaryDirectory() as folder:
        store = stored(trajectory, Path(folder) / "alight.db")
        read = best_ms(lambda: build_trajectory(store, trajectory.rollout_id), args.repeats)
        store.close()
    rows = {
        "read from store": read,
        "serialize": best_ms(trajectory.model_dump_json, args.repeats),
        "redact, no cache": best_ms(lambda: redact_trajectory(Redactor(cached_texts=0), trajectory), args.repeats),
        "redact, cold": best_ms(lambda: redact_trajectory(Redactor(), trajectory), args.repeats),
        "redact, warm": best_ms(lambda: redact_trajectory(warm, trajectory), args.repeats),
    }
    redacted = redact_trajectory(Redactor(), trajectory)
    hidden = sum("redacted" in c.call.flags for c in redacted.calls)
    print(f"trajectory: {args.calls} calls, {kb:.0f} KB of content, {hidden} calls with something hidden")
    for name, ms in rows.items():
        print(f"  {name:17s} {ms:9.1f} ms per trajectory  {ms / kb:7.3f} ms per KB")
    print(f"  cold / read from store {rows['redact, cold'] / rows['read from store']:.2f}x;  no cache / cold "
          f"{rows['redact, no cache'] / rows['redact, cold']:.1f}x")  # fmt: skip
    log = training_log(2500)
    log_ms = best_ms(lambda: Redactor(cached_texts=0).spans(log), max(1, args.repeats // 2))
    print(f"an attempt log of {len(log) // 1024} KB (timestamps, metrics, ids): {log_ms:.0f} ms, "
          f"{log_ms / (len(log) / 1024):.2f} ms per KB")  # fmt: skip
    texts = distinct_texts(json.loads(trajectory.model_dump_json()), set())
    config = RedactionConfig()
    print(f"per detector, over the {len(texts)} distinct texts ({sum(map(len, texts)) / 1024:.0f} KB):")
    for kind in sorted(config.kinds()):
        (find,) = finders(frozenset({kind}), config.phone_regions)
        ms = best_ms(lambda find=find: [list(find(t)) for t in texts], max(1, args.repeats // 2))
        if ms >= 0.5:
            print(f"  {kind:32s} {ms:8.1f} ms")
    if args.hostile_kb:
        hostile(args.hostile_kb, 1)


HOSTILE = {"JWT-like run": "eyJ", "digit pairs": "1 ", "base64 run": "Ab3/", "keyword lines": "password = x\n"}


def hostile(kb: int, repeats: int) -> None:
    """Model-written text built to make a pattern backtrack: windows (the default) vs one scan of the whole."""
    print(f"hostile text, {kb} KB each: windows of {redactor.WINDOW} chars vs the whole text at once")
    window = redactor.WINDOW
    for name, unit in HOSTILE.items():
        text = unit * (kb * 1024 // len(unit))
        windowed = best_ms(lambda text=text: Redactor(cached_texts=0).spans(text), repeats)
        redactor.WINDOW = 10**9
        whole = best_ms(lambda text=text: Redactor(cached_texts=0).spans(text), repeats)
        redactor.WINDOW = window
        print(f"  {name:14s} windows {windowed:8.0f} ms   whole {whole:8.0f} ms   ({whole / windowed:.1f}x)")


if __name__ == "__main__":
    main()
