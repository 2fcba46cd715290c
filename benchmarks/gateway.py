"""Gateway overhead: direct-to-upstream vs through the gateway (durable capture on), in one run.

    .venv/bin/python benchmarks/gateway.py [--concurrency 16] [--requests 2000] [--sequential 300]
        [--rounds 5] [--stream] [--upstream raw|fake] [--replicas 1] [--feel 1,100]

1. Start a fast upstream double (`raw`: an ASGI app returning one precomputed
   vLLM-shaped chat completion with 32 tokens; `fake`: the vLLM-shaped test
   double from alight_testing) and the alight server (SQLite store in a temp
   dir, one upstream registered, one attempt claimed per client), each in its
   own process with uvloop. `--replicas N` runs N gateway processes on that
   one store (clients spread over them), as a gateway is scaled out.
   A bare pass-through proxy runs too: the same HTTP stack as the gateway
   (uvicorn in, aiohttp out) with no auth, translation or capture. It is the
   ceiling any proxy built on that stack reaches on this machine, so the
   numbers separate the cost of the extra HTTP hop from the gateway's own.
2. Sequential phase (one client): per-call latency direct, through the bare
   proxy and through the gateway; the difference of the medians is the
   added latency. Twice: with a one-line body, and with a realistic one
   (a system prompt and three turns of a few dozen words; the reply is 32 tokens).
   Each prints the gateway's CPU time per call too (from /proc): a lone call
   commits alone, so it costs more than a call in a concurrent group.
   `--rounds` repeats both phases (every path in turn each round) and prints
   each round's added p50 and their median: the same idle machine runs 2-4x
   slower at times (every run's first round, some whole minutes), so a single
   round shows one draw. The share of CPU time the hypervisor stole during
   those phases (/proc/stat) is printed with them: where it is high, the
   latencies say more about the host than about the gateway.
3. Concurrent phase (N clients): calls/s and p50/p99 latency for each path.
4. What the client feels (`--feel`, 1 and 100 clients on the gateway): the
   time to the response start as the load client sees it, next to the
   gateway's own metrics scraped from /metrics around the phase
   (alight_gateway_response_start_seconds counts from the connection's accept,
   queueing before the handler included; alight_gateway_call_latency_seconds
   is the handler's view, which misses that queueing).
5. Check every gateway call was recorded, and print the ratios, the CPU time
   each process spent per call in the concurrent phases (steadier than calls/s
   on a shared machine) and the load average.

Every path uses the same load client (aiohttp, one session, N coroutines) and
the same upstream double, so the ratios are the hop's and the gateway's own cost.
The parts live in benchmarks/gateway_bench/ (servers.py, load.py, measure.py).
"""

from __future__ import annotations

import argparse
import atexit
import multiprocessing as mp
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from gateway_bench.load import REALISTIC, SHORT, load
from gateway_bench.measure import Meter, cpu_times, pct, scrape, server_mean_ms, steal_share
from gateway_bench.servers import ADMIN_KEY, MODEL, run_bare_proxy, run_gateway, run_upstream, wait_until_up
from record import record

WARMUP = 200  # calls per path before anything is measured
LABELS = {"direct": "direct ", "bare": "bare   ", "gateway": "gateway"}
Clients = list[tuple[str, str]]  # (url, token) per client


def _feel(gateway: Clients, ports: list[int], clients: int, total: int, stream: bool) -> str:
    """One line: what `clients` concurrent agents saw, next to what the gateway's metrics say."""
    starts: list[float] = []
    before = scrape(ports)
    load(gateway[:clients], total, stream, starts=starts)
    after = scrape(ports)
    mean = 1000 * statistics.fmean(starts)
    server = {m: server_mean_ms(before, after, m) for m in ("response_start_seconds", "queued_seconds")}
    handler = server_mean_ms(before, after, "call_latency_seconds")
    return (
        f"  {clients:3d} clients: client response start p50 {pct(starts, 0.5):7.2f}  p99 {pct(starts, 0.99):7.2f}"
        f"  mean {mean:7.2f} ms | server accept→response start mean {server['response_start_seconds']:7.2f}"
        f" (queued {server['queued_seconds']:.2f}), handler call latency mean {handler:7.2f} ms"
    )


Sequential = dict[str, tuple[list[float], float | None]]  # path -> (latencies, own CPU ms per call)


def _sequential(paths: dict[str, Clients], meter: Meter, calls: int, stream: bool, messages: list) -> Sequential:
    """One client on each path in turn: its latencies, and the CPU per call of the process in between."""
    out = {}
    for name, clients in paths.items():
        (latencies, _), spent = meter.run(lambda c=clients: load(c[:1], calls, stream, messages))
        own = {"gateway": "gateway", "bare": "bare"}.get(name)
        out[name] = (latencies, 1000 * spent[own] / calls if own else None)
    return out


def _added_ms(result: Sequential, path: str) -> float:
    return 1000 * (statistics.median(result[path][0]) - statistics.median(result["direct"][0]))


def _print_sequential(title: str, rounds: list[Sequential], goal_ms: float) -> dict[str, float]:
    """Each path's latencies over all rounds, and the added p50 of each round (a round's paths ran back to back).

    Returns the median over the rounds of each path's added p50 (gateway, bare), in ms.
    """
    print(title)
    for name, label in LABELS.items():
        latencies = [x for r in rounds for x in r[name][0]]
        cpu = [c for r in rounds if (c := r[name][1]) is not None]
        line = f"  {label} p50 {pct(latencies, 0.5):7.2f} ms  p99 {pct(latencies, 0.99):7.2f} ms"
        own = "gateway" if name == "gateway" else "proxy"
        print(line + (f"  {own} CPU {statistics.fmean(cpu):.2f} ms/call" if cpu else ""))
    medians = {}
    for path in ("gateway", "bare"):
        added = [_added_ms(r, path) for r in rounds]
        medians[path] = statistics.median(added)
        goal = f" (goal < {goal_ms:g} ms)" if path == "gateway" else ""
        spread = f", rounds {min(added):.2f}-{max(added):.2f}: {' '.join(f'{a:.2f}' for a in added)}"
        name = "gateway" if path == "gateway" else "bare proxy"
        print(f"  added p50 latency, {name}: {medians[path]:.2f} ms{goal}" + (spread if len(added) > 1 else ""))
    return medians


def _print_concurrent(con: dict, cpu: dict, requests: int, concurrency: int) -> dict[str, float]:
    """Prints each path's calls/s, latencies and CPU per call; returns the calls/s (direct, bare, gateway)."""
    print(f"concurrent ({requests} calls, {concurrency} clients):")
    rate = {}
    for name, label in LABELS.items():
        latencies, wall = con[name]
        rate[name] = len(latencies) / wall
        print(
            f"  {label} {rate[name]:8.0f} calls/s  p50 {pct(latencies, 0.5):7.2f} ms  p99 {pct(latencies, 0.99):7.2f} ms"
        )
    print(f"  throughput ratio gateway/direct: {rate['gateway'] / rate['direct']:.2f} (goal >= 0.50)")
    print(f"  bare proxy/direct: {rate['bare'] / rate['direct']:.2f} (the ceiling of a proxy on this HTTP stack here)")
    print(f"  gateway/bare proxy: {rate['gateway'] / rate['bare']:.2f}")
    per_call = {name: {k: 1000 * v / requests for k, v in spent.items()} for name, spent in cpu.items()}
    print("  CPU ms per call (concurrent phase):")
    for name, own in (("direct", None), ("bare", "bare"), ("gateway", "gateway")):
        parts = f"client {per_call[name]['client']:.2f} + upstream {per_call[name]['upstream']:.2f}"
        if own:
            parts += f" + {'bare proxy' if own == 'bare' else 'gateway'} {per_call[name][own]:.2f}"
        print(f"    {LABELS[name]} {parts}")
    return rate


def _claim_attempts(db_url: str, up_port: int, clients: int) -> list[tuple[str, int, str]]:
    """Register the upstream and start one attempt per client: (rollout id, attempt, token) each."""
    from alight.schemas import RolloutCreate, UpstreamCreate
    from alight_server.config import ServerConfig
    from alight_server.http.auth import derive_token_secret, issue_attempt_token
    from alight_server.store.sql import SqlStore

    store = SqlStore(db_url, ServerConfig(admin_key=ADMIN_KEY).kek_source())  # the gateway's KEK: it opens these
    store.add_upstream(UpstreamCreate(id="bench", url=f"http://127.0.0.1:{up_port}/v1", model=MODEL))
    rollouts = store.create_rollouts([RolloutCreate(task={"i": i}) for i in range(clients)])
    claimed = store.claim_attempts(limit=clients, ids=[r.id for r in rollouts])
    secret = derive_token_secret(ADMIN_KEY)
    store.close()
    return [(r.id, a, issue_attempt_token(secret, r.id, a, ttl_s=3600)) for r, a in claimed]


def _recorded(db_url: str, tokens: list[tuple[str, int, str]]) -> int:
    from alight_server.config import ServerConfig
    from alight_server.store.sql import SqlStore

    store = SqlStore(db_url, ServerConfig(admin_key=ADMIN_KEY).kek_source())  # the calls are sealed under its keys
    try:
        return sum(len(store.list_model_calls(rid, n)) for rid, n, _ in tokens)
    finally:
        store.close()


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--requests", type=int, default=2000, help="calls per concurrent phase")
    parser.add_argument("--sequential", type=int, default=300, help="calls per sequential phase")
    parser.add_argument(
        "--rounds", type=int, default=5, help="sequential phases, each path and body in turn per round (median shown)"
    )
    parser.add_argument("--stream", action="store_true", help="streamed chat completions")
    parser.add_argument(
        "--upstream",
        choices=["raw", "fake"],
        default="raw",
        help="raw: a constant precomputed answer (the harshest baseline); fake: the vLLM-shaped test double",
    )
    parser.add_argument("--replicas", type=int, default=1, help="gateway processes sharing the store")
    parser.add_argument("--feel", default="1,100", help="client counts for the what-the-client-feels phase ('' skips)")
    parser.add_argument(
        "--record", action="store_true", help="append the results to benchmarks/results.jsonl (benchmarks/record.py)"
    )
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    return args


def main() -> None:
    from alight_server.stacks.server_thread import free_port

    args = _arguments()
    feel = [int(n) for n in args.feel.split(",") if n.strip()]
    tmp = Path(tempfile.mkdtemp(prefix="alight-bench-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)  # the capture store is read at the end, then gone
    db_url = f"sqlite:///{tmp / 'alight.db'}"
    up_port, bare_port = free_port(), free_port()
    gw_ports = [free_port() for _ in range(args.replicas)]
    tokens = _claim_attempts(db_url, up_port, max([args.concurrency, *feel]))

    ctx = mp.get_context("spawn")
    procs = [
        ctx.Process(target=run_upstream, args=(up_port, args.upstream)),
        ctx.Process(target=run_bare_proxy, args=(bare_port, up_port)),
        *(ctx.Process(target=run_gateway, args=(port, db_url)) for port in gw_ports),
    ]
    for p in procs:
        p.start()
    try:
        wait_until_up(f"http://127.0.0.1:{up_port}/v1/models")
        wait_until_up(f"http://127.0.0.1:{bare_port}/v1/models")
        for port in gw_ports:
            wait_until_up(f"http://127.0.0.1:{port}/metrics")
        paths = {
            "direct": [(f"http://127.0.0.1:{up_port}/v1/chat/completions", "none")] * len(tokens),
            "bare": [(f"http://127.0.0.1:{bare_port}/v1/chat/completions", "none")] * len(tokens),
            "gateway": [
                (f"http://127.0.0.1:{gw_ports[i % len(gw_ports)]}/gw/{rid}/{n}/v1/chat/completions", tok)
                for i, (rid, n, tok) in enumerate(tokens)
            ],
        }
        for clients in paths.values():
            load(clients[:4], WARMUP, args.stream)
        meter = Meter({"upstream": [procs[0].pid], "bare": [procs[1].pid], "gateway": [p.pid for p in procs[2:]]})
        seq, real = [], []
        began = cpu_times()
        for _ in range(args.rounds):  # the machine's speed drifts; rounds show by how much
            seq.append(_sequential(paths, meter, args.sequential, args.stream, SHORT))
            real.append(_sequential(paths, meter, args.sequential, args.stream, REALISTIC))
        stolen = steal_share(began, cpu_times())
        con, cpu = {}, {}
        for name, c in paths.items():
            con[name], cpu[name] = meter.run(lambda c=c: load(c[: args.concurrency], args.requests, args.stream))
        felt = [_feel(paths["gateway"], gw_ports, n, max(args.sequential, 2 * n), args.stream) for n in feel]
    finally:
        for p in procs:
            p.terminate()
            p.join(10)

    recorded = _recorded(db_url, tokens)
    expected = (
        WARMUP + 2 * args.rounds * args.sequential + args.requests + sum(max(args.sequential, 2 * n) for n in feel)
    )
    kind = "streamed" if args.stream else "non-streamed"
    replicas = f", {args.replicas} gateway processes" if args.replicas > 1 else ""
    print(
        f"gateway benchmark: {kind} chat completions, {args.upstream} upstream, SQLite capture{replicas}, "
        f"{mp.cpu_count()} CPUs"
    )
    per = f"{args.sequential} calls" + (f" x {args.rounds} rounds" if args.rounds > 1 else "")
    short = _print_sequential(f"sequential ({per}, 1 client):", seq, 2.0)
    title = f"sequential, realistic body ({per}, 1 client, 4 messages of 30-40 words, 32-token reply):"
    realistic = _print_sequential(title, real, 1.2)
    print(f"  CPU time the hypervisor stole from this VM during the sequential phases: {stolen}")
    rate = _print_concurrent(con, cpu, args.requests, args.concurrency)
    if felt:
        print("what the client feels (gateway only; client-side vs the gateway's /metrics):")
        print("\n".join(felt))
    print(f"  load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"recorded model calls: {recorded} of {expected} sent through the gateway")
    if args.record:
        setting = f"{kind} chat completions, {args.upstream} upstream, durable SQLite capture{replicas}"
        record(
            "gateway",
            f"gateway added latency, 1 client, {args.sequential} sequential calls x {args.rounds} round(s) per body, "
            f"{setting}",
            f"realistic body (4 messages, 32-token reply) +{realistic['gateway']:.2f} ms p50 over direct "
            f"(goal < 1.2 ms), one-line body +{short['gateway']:.2f} ms (goal < 2 ms); a bare proxy adds "
            f"+{realistic['bare']:.2f} / +{short['bare']:.2f} ms; {stolen} of CPU stolen by the hypervisor",
        )
        record(
            "gateway",
            f"gateway throughput, {args.concurrency} concurrent clients, {args.requests} calls, {setting}",
            f"{rate['gateway']:.0f} calls/s, {rate['gateway'] / rate['direct']:.2f}x direct (goal >= 0.50); "
            f"a bare proxy {rate['bare'] / rate['direct']:.2f}x direct, "
            f"the gateway {rate['gateway'] / rate['bare']:.2f}x the bare proxy",
        )


if __name__ == "__main__":
    main()
