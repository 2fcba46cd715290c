"""Encryption at rest's cost: gateway CPU per captured call and sample-builder throughput, sealed vs clear, one run.

    .venv/bin/python benchmarks/encryption.py [--calls 400] [--rounds 10] [--concurrency 8] [--requests 6000]
        [--trajectories 200] [--repeats 9]

The same code twice, side by side: a store that seals content (the default) and one whose sealing is
turned off (`use_data_keys(None)`, the benchmark's baseline only); the rest is identical.

1. Gateway: the raw upstream double (benchmarks/gateway_bench) and two gateway processes, one per store
   (each its own SQLite file), uvloop, as `alight serve` runs. The same load client sends `--calls`
   realistic-body calls (a system prompt and three turns, a 32-token reply) to one gateway then the
   other, `--rounds` times, and then `--requests` calls from `--concurrency` clients to each (split over
   the same alternating rounds). What is
   compared is each gateway process's CPU time per call (/proc): steady on a shared machine, where
   latency moves with whatever else runs. Every call is checked as recorded, and sealed where it should be.
   Then the extra work itself, in this process: sealing the content cells of one captured call's row
   (taken from the clear store, so exactly what the gateway writes), as a share of a call's CPU.
2. Sample builder: `--trajectories` synthetic multi-turn trajectories (benchmarks/samples.py: 10 calls,
   ~2k tokens each) stored as model calls in a sealed and in a clear store, each served by its own
   server (in this process); then, alternating per repeat, every trajectory is read and the training
   rows built (`build_samples`): through the trajectory API, as the trainer reads them, and from the
   store alone (`build_trajectory`, no HTTP or JSON in between: the harshest ratio). The CPU time of this
   process (the servers' threads included; wall time moves with the machine's load), and the median of
   the repeats' sealed/clear ratios. Then the extra work itself: opening every sealed model_calls cell
   once, in process, as a share of a clear pass.
Prints each ratio against the budget: sealed within 10 % of clear.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import statistics
import tempfile
import time
from pathlib import Path

from gateway_bench.load import REALISTIC, load
from gateway_bench.measure import Meter, pct
from gateway_bench.servers import ADMIN_KEY, MODEL, run_upstream, wait_until_up
from samples import synthetic_trajectory

BUDGET = 1.10  # sealed may cost at most 10 % more than clear
WARMUP = 200


def run_gateway(port: int, db_url: str, sealed: bool) -> None:
    """The alight server as `alight serve` runs it, sealing content or (baseline) not."""
    import uvicorn

    from alight_server.app import create_app
    from alight_server.config import ServerConfig
    from alight_server.gateway.request.arrival import StampedHttp

    app = create_app(ServerConfig(db_url=db_url, admin_key=ADMIN_KEY, port=port))
    if not sealed:
        app.state.store.use_data_keys(None)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", loop="uvloop", http=StampedHttp)


def _store(db_url: str, sealed: bool):  # -> SqlStore
    from alight_server.config import ServerConfig
    from alight_server.store.sql import SqlStore

    store = SqlStore(db_url, ServerConfig(admin_key=ADMIN_KEY).kek_source())  # the gateway's own KEK
    if not sealed:
        store.use_data_keys(None)
    return store


def _claim(db_url: str, sealed: bool, up_port: int, clients: int) -> list[tuple[str, int, str]]:
    """Register the upstream and start one attempt per client: (rollout id, attempt, token) each."""
    from alight.schemas import RolloutCreate, UpstreamCreate
    from alight_server.http.auth import derive_token_secret, issue_attempt_token

    store = _store(db_url, sealed)
    store.add_upstream(UpstreamCreate(id="bench", url=f"http://127.0.0.1:{up_port}/v1", model=MODEL))
    rollouts = store.create_rollouts([RolloutCreate(task={"i": i}) for i in range(clients)])
    claimed = store.claim_attempts(limit=clients, ids=[r.id for r in rollouts])
    store.close()
    secret = derive_token_secret(ADMIN_KEY)
    return [(r.id, a, issue_attempt_token(secret, r.id, a, ttl_s=3600)) for r, a in claimed]


def _check_recorded(db_url: str, sealed: bool, tokens: list[tuple[str, int, str]]) -> str:
    """How many calls the store holds, read back through the store, and whether their raw cells are sealed."""
    import sqlite3

    store = _store(db_url, True)
    try:
        recorded = sum(len(store.list_model_calls(rid, n)) for rid, n, _ in tokens)
    finally:
        store.close()
    raw = sqlite3.connect(db_url.removeprefix("sqlite:///"))
    cells = [row[0] for row in raw.execute("SELECT request FROM model_calls LIMIT 50")]
    raw.close()
    prefix = sum(1 for c in cells if str(c).startswith("enc1:"))
    return f"{recorded} recorded, {prefix}/{len(cells)} sampled request cells sealed (expected {'all' if sealed else 'none'})"


def gateway_phase(args: argparse.Namespace, tmp: Path) -> tuple[float, float]:
    from alight_server.stacks.server_thread import free_port

    up_port = free_port()
    ports = {"sealed": free_port(), "clear": free_port()}
    urls = {name: f"sqlite:///{tmp / f'gateway-{name}.db'}" for name in ports}
    tokens = {name: _claim(urls[name], name == "sealed", up_port, args.concurrency) for name in ports}
    ctx = mp.get_context("spawn")
    procs = {"upstream": ctx.Process(target=run_upstream, args=(up_port, "raw"))}
    for name, port in ports.items():
        procs[name] = ctx.Process(target=run_gateway, args=(port, urls[name], name == "sealed"))
    for p in procs.values():
        p.start()
    try:
        wait_until_up(f"http://127.0.0.1:{up_port}/v1/models")
        for port in ports.values():
            wait_until_up(f"http://127.0.0.1:{port}/metrics")
        clients = {
            name: [
                (f"http://127.0.0.1:{ports[name]}/gw/{rid}/{n}/v1/chat/completions", tok)
                for rid, n, tok in tokens[name]
            ]
            for name in ports
        }
        for c in clients.values():
            load(c[:4], WARMUP, False, REALISTIC)
        meter = Meter({name: [procs[name].pid] for name in ports})
        seq: dict[str, list[float]] = {name: [] for name in ports}
        lat: dict[str, list[float]] = {name: [] for name in ports}
        for r in range(args.rounds):  # alternating, each first in turn: drift in the machine's speed hits both
            for name in list(ports)[:: 1 if r % 2 else -1]:
                (latencies, _), spent = meter.run(lambda c=clients[name]: load(c[:1], args.calls, False, REALISTIC))
                seq[name].append(1000 * spent[name] / args.calls)
                lat[name].extend(latencies)
        con: dict[str, list[float]] = {name: [] for name in ports}
        share = max(1, args.requests // args.rounds)
        for r in range(args.rounds):  # alternating too
            for name in list(ports)[:: 1 if r % 2 else -1]:
                _, spent = meter.run(lambda c=clients[name]: load(c[: args.concurrency], share, False, REALISTIC))
                con[name].append(1000 * spent[name] / share)
    finally:
        for p in procs.values():
            p.terminate()
            p.join(10)
    print(f"gateway, sequential ({args.calls} calls x {args.rounds} rounds, 1 client, realistic body):")
    for name in ports:
        rounds = " ".join(f"{x:.3f}" for x in seq[name])
        print(
            f"  {name:7s} CPU {statistics.median(seq[name]):.3f} ms/call (rounds {rounds})  latency p50 "
            f"{pct(lat[name], 0.5):.2f} ms p99 {pct(lat[name], 0.99):.2f} ms"
        )
    seq_ratio = statistics.median(a / b for a, b in zip(seq["sealed"], seq["clear"], strict=True))  # per round pair
    print(f"  sealed/clear CPU per call (median of the rounds' ratios): {seq_ratio:.3f}")
    print(f"gateway, concurrent ({args.requests} calls in {args.rounds} rounds, {args.concurrency} clients):")
    for name in ports:
        rounds = " ".join(f"{x:.3f}" for x in con[name])
        print(f"  {name:7s} CPU {statistics.median(con[name]):.3f} ms/call (rounds {rounds})")
    con_ratio = statistics.median(a / b for a, b in zip(con["sealed"], con["clear"], strict=True))
    print(f"  sealed/clear CPU per call (median of the rounds' ratios): {con_ratio:.3f}")
    for name in ports:
        print(f"  {name} store: {_check_recorded(urls[name], name == 'sealed', tokens[name])}")
    seal_ms = _seal_cost(urls["clear"])
    part = seal_ms / statistics.median(seq["clear"])
    print(
        f"  sealing one captured call's cells in process (the work sealing adds, as the gateway's row has it): "
        f"{1000 * seal_ms:.1f} us = {100 * part:.1f} % of the clear gateway's CPU per sequential call"
    )
    return seq_ratio, con_ratio


def _seal_cost(clear_url: str, repeats: int = 2000) -> float:
    """CPU ms to seal the content cells of one model_calls row as the gateway wrote it (taken from the clear
    store), with the sealing store's own sealer: a number the shared machine's noise hardly moves."""
    import sqlite3

    from alight_server.store import tables as t

    raw = sqlite3.connect(clear_url.removeprefix("sqlite:///"))
    raw.row_factory = sqlite3.Row
    row = dict(raw.execute("SELECT * FROM model_calls ORDER BY seq DESC LIMIT 1").fetchone())
    raw.close()
    store = _store(clear_url.replace("gateway-clear", "seal-cost"), True)
    try:
        start = time.process_time()
        for _ in range(repeats):
            store.sealer.seal_row(t.model_calls, dict(row))
        return 1000 * (time.process_time() - start) / repeats
    finally:
        store.close()


def _open_cost(sealed_url: str) -> float:
    """CPU seconds to open the sealed cells of every model_calls row in the store (read raw beforehand): the
    work sealing adds to reading them, measured without the rest of the read around it."""
    import sqlite3

    from alight_server.store import tables as t

    raw = sqlite3.connect(sealed_url.removeprefix("sqlite:///"))
    raw.row_factory = sqlite3.Row
    rows = [dict(row) for row in raw.execute("SELECT * FROM model_calls")]
    raw.close()
    store = _store(sealed_url, True)
    try:
        start = time.process_time()
        for row in rows:
            store.sealer.open_row(t.model_calls, row)
        return time.process_time() - start
    finally:
        store.close()


def _fill(db_url: str, sealed: bool, trajectories: list) -> list[str]:
    """Store each trajectory's calls as the gateway would (one attempt, its calls, its end); the rollout ids."""
    from alight.schemas import AttemptFinish, RewardCreate, RolloutCreate

    store = _store(db_url, sealed)
    try:
        ids = [t.rollout_id for t in trajectories]
        store.create_rollouts(
            [RolloutCreate(id=rid, task={"n": i}, group_id=f"g{i // 8}") for i, rid in enumerate(ids)]
        )
        store.claim_attempts(limit=len(ids), ids=ids)
        for t in trajectories:
            store.add_model_calls([tc.call.model_copy(update={"seq": -1}) for tc in t.calls])
            store.add_reward(
                t.rollout_id, RewardCreate(attempt=1, value=t.final_reward or 0.0, final=True), while_running=True
            )
            store.finish_attempt(t.rollout_id, 1, AttemptFinish(status="succeeded"))
    finally:
        store.close()
    return ids


def builder_phase(args: argparse.Namespace, tmp: Path) -> tuple[float, float]:
    """(through the API, from the store alone): sealed/clear sample-builder throughput."""
    import random

    from alight.client import AlightClient
    from alight_server.app import create_app
    from alight_server.config import ServerConfig
    from alight_server.stacks.server_thread import ServerThread, free_port
    from alight_server.trainer.step.samples import SampleConfig, build_samples
    from alight_server.trajectories.join import build_trajectory

    rng = random.Random(0)
    trajectories = [synthetic_trajectory(i, rng) for i in range(args.trajectories)]
    names = ("sealed", "clear")
    stores, servers, clients = {}, [], {}
    for name in names:
        url = f"sqlite:///{tmp / f'samples-{name}.db'}"
        ids = _fill(url, name == "sealed", trajectories)
        stores[name] = (_store(url, name == "sealed"), ids)
        port = free_port()
        app = create_app(ServerConfig(db_url=url, admin_key=ADMIN_KEY, port=port), store=stores[name][0])
        servers.append(ServerThread(app, port=port))
        clients[name] = AlightClient(servers[-1].__enter__(), admin_key=ADMIN_KEY, timeout=120)
    config = SampleConfig(mode="trajectory")
    paths = {
        # as the trainer reads them (trainer/run/rollouts.py): the trajectory API, then the sample builder
        "api": lambda name: [clients[name].trajectory(rid, reveal=True) for rid in stores[name][1]],
        # the store alone: the cells opened, no HTTP or JSON in between (the harshest ratio)
        "store": lambda name: [build_trajectory(stores[name][0], rid) for rid in stores[name][1]],
    }
    spent: dict[tuple[str, str], list[float]] = {(path, name): [] for path in paths for name in names}
    tokens = {}
    try:
        for read in paths.values():  # warm-up: connections, caches, the first request's imports
            for name in names:
                read(name)
        for repeat in range(args.repeats):
            for path, read in paths.items():
                for name in names if repeat % 2 else names[::-1]:  # alternating, and in turn first
                    start = time.process_time()  # CPU, server threads included: steadier than wall time here
                    _, report = build_samples(read(name), config)
                    spent[path, name].append(time.process_time() - start)
                    tokens[path, name] = report.tokens
    finally:
        for server in servers:
            server.__exit__(None, None, None)
        for store, _ in stores.values():
            store.close()
    assert len(set(tokens.values())) == 1 and min(tokens.values()) > 0, f"rows differ or are missing: {tokens}"
    print(
        f"sample builder ({args.trajectories} trajectories of 10 calls, {args.repeats} repeats, CPU of this process):"
    )
    ratios = []
    for path, title in (("api", "through the trajectory API, as the trainer reads"), ("store", "from the store alone")):
        print(f"  {title}:")
        for name in names:
            runs = spent[path, name]
            rate = tokens[path, name] / statistics.median(runs) / 1e6
            each = " ".join(f"{x:.2f}" for x in runs)
            print(
                f"    {name:7s} median {statistics.median(runs):.3f} CPU s ({each})  {rate:.3f} M row tokens per CPU s"
            )
        pairs = [c / s for s, c in zip(spent[path, "sealed"], spent[path, "clear"], strict=True)]
        ratios.append(statistics.median(pairs))
        print(f"    sealed/clear throughput (median of the repeats' ratios): {ratios[-1]:.3f}")
    opening = _open_cost(f"sqlite:///{tmp / 'samples-sealed.db'}")
    part = opening / statistics.median(spent["store", "clear"])
    print(
        f"  opening every sealed model_calls cell of those {args.trajectories} trajectories once, in process: "
        f"{opening:.3f} CPU s = {100 * part:.1f} % of a clear pass from the store alone"
    )
    return ratios[0], ratios[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=400, help="calls per gateway per sequential round")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--requests", type=int, default=6000, help="calls per gateway in the concurrent phase")
    parser.add_argument("--trajectories", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    logging.getLogger("alight.store").setLevel(logging.ERROR)  # the baseline's "may hold content in the clear"
    tmp = Path(tempfile.mkdtemp(prefix="alight-enc-bench-"))
    print(f"encryption benchmark: SQLite stores in {tmp}, {mp.cpu_count()} CPUs")
    seq_ratio, con_ratio = gateway_phase(args, tmp)
    api, store_only = builder_phase(args, tmp)
    print("budget: sealed within 10 % of clear")
    for what, cost in (
        ("gateway CPU per call, sequential", seq_ratio),
        ("gateway CPU per call, concurrent", con_ratio),
        ("sample builder time per row token, trajectory API", 1 / api),
        ("sample builder time per row token, store alone", 1 / store_only),
    ):
        print(f"  {what}: x{cost:.3f} {'within' if cost <= BUDGET else 'OVER'} budget")


if __name__ == "__main__":
    main()
