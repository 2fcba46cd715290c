"""The sandbox's way out: what the forwarder (and the in-sandbox relay before it) adds to each model call.

    .venv/bin/python benchmarks/forwarder.py [--calls 300] [--rounds 5] [--stream]

1. Start the raw upstream double and the alight server (gateway_bench/servers.py, each its own process,
   uvloop), register the upstream and claim one attempt.
2. Serve that attempt with a Forwarder on a Unix socket in this process (as a CLI harness does), and run
   the relay (sandbox/src/alight_sandbox/guards/relay.py, `python -I -S`) as its own process on a loopback port, in front
   of that socket, as it runs inside the sandbox (here without the sandbox's namespaces, which add
   nothing per call: the relay's socket and the forwarder's are the same either way).
3. One client (httpx, one kept-alive connection per path), `--calls` chat completions per path per
   round, the paths in turn each round: direct to the gateway with the token; to the forwarder's
   socket; to the relay's port (the path a sandboxed CLI's call takes). Per round the median latency of
   each, the added milliseconds against direct, and the ratio; then the median of the rounds.

No numbers are asserted anywhere: the machine's speed varies 2-4x between minutes (benchmarks/gateway.py).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from gateway import _claim_attempts  # the gateway benchmark's set-up, shared
from gateway_bench.load import REALISTIC
from gateway_bench.servers import MODEL, run_gateway, run_upstream, wait_until_up

from alight_sandbox.guards.forwarder import Forwarder
from alight_server.stacks.server_thread import free_port

RELAY = Path(__file__).resolve().parents[1] / "sandbox" / "src" / "alight_sandbox" / "guards" / "relay.py"
PATHS = ("direct", "forwarder", "relay")


def _timed(client: httpx.Client, url: str, body: dict[str, object], calls: int) -> list[float]:
    latencies = []
    for _ in range(calls):
        started = time.perf_counter()
        with client.stream("POST", url, json=body) as answer:
            answer.read()
        latencies.append(time.perf_counter() - started)
        if answer.status_code != 200:
            raise RuntimeError(f"{url}: {answer.status_code} {answer.text[:300]}")
    return latencies


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300, help="calls per path per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--stream", action="store_true", help="streamed chat completions (SSE)")
    args = parser.parse_args()
    if args.calls < 1 or args.rounds < 1:
        parser.error("--calls and --rounds must be at least 1")
    return args


def main() -> None:
    args = _arguments()
    tmp = Path(tempfile.mkdtemp(prefix="alight-fwd-bench-"))
    db_url = f"sqlite:///{tmp / 'bench.db'}"
    up_port, gw_port, relay_port = free_port(), free_port(), free_port()
    ctx = mp.get_context("spawn")
    servers = [
        ctx.Process(target=run_upstream, args=(up_port, "raw")),
        ctx.Process(target=run_gateway, args=(gw_port, db_url)),
    ]
    servers[1].start()
    wait_until_up(f"http://127.0.0.1:{gw_port}/metrics")  # the gateway made the store's tables
    servers[0].start()
    wait_until_up(f"http://127.0.0.1:{up_port}/v1/models")
    [(rollout_id, attempt, token)] = _claim_attempts(db_url, up_port, 1)
    gateway = f"http://127.0.0.1:{gw_port}/gw/{rollout_id}/{attempt}/v1"
    socket_path = tmp / "gw.sock"
    body: dict[str, object] = {"model": MODEL, "messages": REALISTIC, "stream": args.stream}
    relay = None
    try:
        with Forwarder(socket_path, gateway, token):
            relay = subprocess.Popen(
                [sys.executable, "-I", "-S", str(RELAY), str(relay_port), str(socket_path), "--", "sleep", "86400"]
            )
            wait_until_up(f"http://127.0.0.1:{relay_port}/v1/models")
            clients = {
                "direct": (httpx.Client(headers={"authorization": f"Bearer {token}"}), f"{gateway}/chat/completions"),
                "forwarder": (
                    httpx.Client(transport=httpx.HTTPTransport(uds=str(socket_path))),
                    "http://sandbox/v1/chat/completions",
                ),
                "relay": (httpx.Client(), f"http://127.0.0.1:{relay_port}/v1/chat/completions"),
            }
            for client, url in clients.values():
                _timed(client, url, body, 50)  # warm-up: connections open, code paths hot
            medians: dict[str, list[float]] = {p: [] for p in PATHS}
            print(f"{args.calls} calls per path per round, {'streamed' if args.stream else 'not streamed'}, "
                  f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")  # fmt: skip
            for n in range(args.rounds):
                for path in PATHS:
                    client, url = clients[path]
                    medians[path].append(1000 * statistics.median(_timed(client, url, body, args.calls)))
                direct = medians["direct"][-1]
                print(
                    f"  round {n + 1}: direct p50 {direct:6.2f} ms | "
                    + " | ".join(
                        f"{p} p50 {medians[p][-1]:6.2f} ({medians[p][-1] - direct:+5.2f} ms, x{medians[p][-1] / direct:4.2f})"
                        for p in PATHS[1:]
                    )
                )
            direct = statistics.median(medians["direct"])
            for path in PATHS[1:]:
                mid = statistics.median(medians[path])
                print(
                    f"median of rounds, {path:9s}: {mid - direct:+5.2f} ms per call, x{mid / direct:4.2f} of direct ({direct:.2f} ms)"
                )
            for client, _ in clients.values():
                client.close()
    finally:
        if relay is not None:
            relay.terminate()
            relay.wait()
        for server in servers:
            server.terminate()
            server.join()


if __name__ == "__main__":
    main()
