"""Purge on SQLite: what it costs the capture path beside it, and incremental vacuum vs one full VACUUM, in one run.

    .venv/bin/python benchmarks/purge.py [--rollouts 500] [--purge-share 0.8] [--kb 24]

1. Two stores get the same rollouts (each ended, with one model call of `--kb` KB of body and token ids):
   one made as every new store is (auto_vacuum=INCREMENTAL), one made before that (auto_vacuum off).
2. A thread captures model calls one after another into a running rollout (the gateway's insert): alone
   (the baseline), while `--purge-share` of the rollouts are purged, and while each store gives the space
   back (incremental_vacuum in steps; one full VACUUM). Each insert's latency, p50 / p99 / max, and the
   ratios to the baseline: a purge batch or a vacuum step holds SQLite's write lock; an insert waits for it.
3. Each reclaim's time and the file with its WAL before and after (then each alone).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from alight.schemas import ApiFlavour, AttemptFinish, ModelCall, RolloutCreate
from alight_server.store.base import PurgeScope
from alight_server.store.keys.kek import KekSource
from alight_server.store.rows import now
from alight_server.store.sql import SqlStore

KEY = KekSource.parse("secret", admin_key="alk_purge-benchmark")


def _call(rollout_id: str, attempt: int, kb: int, tokens: int = 64) -> ModelCall:
    text = "x" * (kb * 512)  # half the size in the request, half in the reply
    return ModelCall(
        id=uuid.uuid4().hex, rollout_id=rollout_id, attempt=attempt, seq=0, flavour=ApiFlavour.CHAT,
        request={"messages": [{"role": "user", "content": text}]},
        response={"choices": [{"message": {"content": text}}]},
        prompt_token_ids=list(range(4 * tokens)), response_token_ids=list(range(tokens)),
        response_logprobs=[-0.5] * tokens, status_code=200, created_at=now(),
    )  # fmt: skip


def _fill(store: SqlStore, count: int, kb: int, prefix: str) -> None:
    ids = [f"{prefix}{i:05d}" for i in range(count)]
    store.create_rollouts([RolloutCreate(id=rid, task={"q": rid}) for rid in ids])
    for rollout, attempt in store.claim_attempts(count, ids=ids):
        store.add_model_call(_call(rollout.id, attempt, kb))
        store.finish_attempt(rollout.id, attempt, AttemptFinish(status="succeeded"))


def _capture_latencies(store: SqlStore, rollout_id: str, stop: threading.Event, out: list[float]) -> None:
    """Insert model calls into a running rollout one after another until `stop`: each insert's seconds."""
    while not stop.is_set():
        started = time.perf_counter()
        store.add_model_call(_call(rollout_id, 1, 0, tokens=4))  # small: the stores' sizes stay comparable
        out.append(time.perf_counter() - started)


def _summary(latencies: list[float]) -> tuple[float, float, float]:
    ms = sorted(x * 1000 for x in latencies)
    return statistics.median(ms), ms[int(len(ms) * 0.99)], ms[-1]


def _beside(store: SqlStore, work: Callable[[], object]) -> tuple[list[float], float]:
    """Capture inserts' latencies while `work` runs (a second at least for the baseline), and its seconds."""
    latencies: list[float] = []
    stop = threading.Event()
    writer = threading.Thread(target=_capture_latencies, args=(store, "live", stop, latencies))
    writer.start()
    started = time.perf_counter()
    work()
    seconds = time.perf_counter() - started
    stop.set()
    writer.join()
    return latencies, seconds


def _line(label: str, latencies: list[float], base: tuple[float, float, float] | None = None) -> str:
    p50, p99, top = _summary(latencies)
    ratio = f"  (x{p50 / base[0]:.2f} / x{p99 / base[1]:.2f} / x{top / base[2]:.2f})" if base else ""
    return f"{label:<34} p50 {p50:6.2f} ms  p99 {p99:7.2f} ms  max {top:7.2f} ms  {len(latencies):5d} calls{ratio}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rollouts", type=int, default=500)
    parser.add_argument("--purge-share", type=float, default=0.8, help="of the rollouts, how many are purged")
    parser.add_argument("--kb", type=int, default=24, help="content per rollout's model call")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="alight-purge-bench-"))
    paths = {"incremental": folder / "new.db", "full": folder / "old.db"}
    with sqlite3.connect(paths["full"]) as conn:  # a store made before incremental vacuuming
        conn.execute("CREATE TABLE filler (x)")
    stores = {name: SqlStore(f"sqlite:///{path}", KEY) for name, path in paths.items()}
    purged = round(args.rollouts * args.purge_share)
    for store in stores.values():
        _fill(store, purged, args.kb, "old-")
    cut = now()
    for store in stores.values():
        _fill(store, args.rollouts - purged, args.kb, "new-")
        store.create_rollouts([RolloutCreate(id="live")])
        store.claim_attempts(1, ids=["live"])
    store = stores["incremental"]

    alone, _ = _beside(store, lambda: time.sleep(1.0))
    base = _summary(alone)
    during, purge_s = _beside(store, lambda: store.purge_rollouts(PurgeScope(before=cut)))
    stores["full"].purge_rollouts(PurgeScope(before=cut))
    print(f"{purged} of {args.rollouts} rollouts purged in {purge_s:.3f} s (the incremental store)")
    print(_line("capture insert alone", alone))
    print(_line("capture insert beside the purge", during, base))
    seconds: dict[str, float] = {}
    for name, target in stores.items():
        sizes: list[tuple[int, int]] = []
        latencies, seconds[name] = _beside(target, lambda t=target, out=sizes: out.append(t.reclaim_space(full=True)))
        (before, after), how = sizes[0], "incremental_vacuum" if name == "incremental" else "one full VACUUM"
        print(_line(f"capture insert beside {how}", latencies, base))
        db, wal = (os.path.getsize(f) if os.path.exists(f) else 0 for f in (paths[name], f"{paths[name]}-wal"))
        print(
            f"{'':<34} {how}: {seconds[name]:.3f} s; file + WAL {before / 1e6:.2f} MB -> {after / 1e6:.2f} MB "
            f"(file {db / 1e6:.2f} MB, WAL {wal / 1e6:.2f} MB: a WAL is truncated once no writer is in the way)"
        )
    print(f"incremental_vacuum / full VACUUM time: {seconds['incremental'] / seconds['full']:.2f}x")
    for s in stores.values():
        s.close()


if __name__ == "__main__":
    main()
