"""Gateway overhead: direct-to-upstream vs through the gateway (durable capture on), in one run.

    .venv/bin/python benchmarks/gateway.py [--concurrency 16] [--requests 2000] [--sequential 300]
        [--stream] [--upstream raw|fake] [--replicas 1] [--feel 1,100]

1. Start a fast upstream double (`raw`: an ASGI app returning one precomputed
   vLLM-shaped chat completion with 32 tokens; `fake`: the vLLM-shaped test
   double from alight_server.testing) and the alight server (SQLite store in a temp
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
3. Concurrent phase (N clients): calls/s and p50/p99 latency for each path.
4. What the client feels (`--feel`, 1 and 100 clients on the gateway): the
   time to the response start as the load client sees it, next to the
   gateway's own metrics scraped from /metrics around the phase
   (alight_gateway_response_start_seconds counts from the connection's accept,
   queueing before the handler included; alight_gateway_call_latency_seconds
   is the handler's view, which misses that queueing).
5. Check every gateway call was recorded, and print the ratios, the CPU time
   each process spent per call in the concurrent phases (from /proc; steadier
   than calls/s on a shared machine) and the load average.

Every path uses the same load client (aiohttp, one session, N coroutines) and
the same upstream double, so the ratios are the hop's and the gateway's own cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

MODEL = "bench-policy"
ADMIN_KEY = "alk_bench"


def _upstream_body(stream: bool) -> list[bytes]:
    ids = list(range(1000, 1032))
    content = [{"token": f" w{i}", "logprob": -0.5, "bytes": [32, 119], "top_logprobs": []} for i in ids]
    text = "".join(e["token"] for e in content)
    if not stream:
        body = {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 0,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": {"content": content},
                    "finish_reason": "stop",
                    "token_ids": ids,
                }
            ],
            "usage": {"prompt_tokens": 64, "completion_tokens": len(ids), "total_tokens": 64 + len(ids)},
            "prompt_token_ids": list(range(64)),
        }
        return [json.dumps(body).encode()]
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": MODEL}
    first = {
        **head,
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
        "prompt_token_ids": list(range(64)),
    }
    chunks = [first]
    for k, (i, e) in enumerate(zip(ids, content, strict=True)):
        last = k == len(ids) - 1
        choice = {"index": 0, "delta": {"content": e["token"]}, "logprobs": {"content": [e]}, "token_ids": [i]}
        choice["finish_reason"] = "stop" if last else None
        chunks.append({**head, "choices": [choice]})
    return [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]


async def _request_body(receive: Any) -> bytes:
    body = b""
    while True:
        msg = await receive()
        body += msg.get("body", b"")
        if not msg.get("more_body"):
            return body


def run_upstream(port: int, kind: str) -> None:
    import uvicorn

    if kind == "fake":  # the vLLM-shaped test double: a FastAPI app that tokenizes and generates
        from alight_server.testing import create_fake_upstream

        fake = create_fake_upstream(model=MODEL)
        uvicorn.run(fake, host="127.0.0.1", port=port, log_level="error", loop="uvloop", http="httptools")
        return
    plain, streamed = _upstream_body(False), b"".join(_upstream_body(True))

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await _request_body(receive)
        stream = b'"stream":true' in body.replace(b" ", b"")
        payload, kind = (streamed, b"text/event-stream") if stream else (plain[0], b"application/json")
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]})
        await send({"type": "http.response.body", "body": payload})

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", loop="uvloop", http="httptools")


def run_bare_proxy(port: int, up_port: int) -> None:
    """Pass every request through to the upstream as it is: no auth, no translation, no capture."""
    import aiohttp
    import uvicorn

    upstream = f"http://127.0.0.1:{up_port}"
    sessions: list[aiohttp.ClientSession] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = await _request_body(receive)
        if not sessions:  # bound to the server's loop, so made on the first request
            sessions.append(aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), auto_decompress=False))
        headers = {"content-type": "application/json"}
        async with sessions[0].request(scope["method"], upstream + scope["path"], data=body, headers=headers) as resp:
            kind = resp.headers.get("content-type", "application/json").encode()
            await send({"type": "http.response.start", "status": resp.status, "headers": [(b"content-type", kind)]})
            if not kind.startswith(b"text/event-stream"):
                await send({"type": "http.response.body", "body": await resp.read()})
                return
            async for piece in resp.content.iter_any():
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            await send({"type": "http.response.body", "body": b""})

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", loop="uvloop", http="httptools", lifespan="off")


def run_gateway(port: int, db_url: str) -> None:
    import uvicorn

    from alight_server.app import create_app
    from alight_server.config import ServerConfig
    from alight_server.gateway.request.arrival import StampedHttp

    app = create_app(ServerConfig(db_url=db_url, admin_key=ADMIN_KEY, port=port))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", loop="uvloop", http=StampedHttp)


def _wait(url: str) -> None:
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up within 60s")


_TEXT = "the agent reads the file then edits the function and runs the tests again before it answers"
_WORDS = _TEXT.split(" ")


def _turn(k: int, n: int = 40) -> str:
    return " ".join(_WORDS[(k + i) % len(_WORDS)] for i in range(n))


# A lone agent's typical call: a system prompt and a few turns of a few dozen words each.
REALISTIC = [
    {"role": "system", "content": _turn(0, 30)},
    {"role": "user", "content": _turn(1)},
    {"role": "assistant", "content": _turn(2)},
    {"role": "user", "content": _turn(3)},
]
SHORT = [{"role": "user", "content": "benchmark me " * 8}]


async def _load(
    urls_tokens: list[tuple[str, str]],
    total: int,
    stream: bool,
    messages: list[dict[str, str]] = SHORT,
    starts: list[float] | None = None,
) -> tuple[list[float], float]:
    """Each (url, token) pair is one client issuing calls back to back; returns latencies and wall time.

    `starts`, when given, gets each call's time to its response start (headers in).
    """
    import aiohttp

    body: dict[str, Any] = {"model": MODEL, "messages": messages}
    if stream:
        body["stream"] = True
    payload = json.dumps(body).encode()
    latencies: list[float] = []
    remaining = [total]
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def client(url: str, token: str) -> None:
            headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
            while remaining[0] > 0:
                remaining[0] -= 1
                t0 = time.perf_counter()
                async with session.post(url, data=payload, headers=headers) as resp:
                    if starts is not None:
                        starts.append(time.perf_counter() - t0)
                    data = await resp.read()
                    if resp.status != 200:
                        raise RuntimeError(f"{url} answered {resp.status}: {data[:200]!r}")
                latencies.append(time.perf_counter() - t0)

        began = time.perf_counter()
        await asyncio.gather(*(client(u, t) for u, t in urls_tokens))
        return latencies, time.perf_counter() - began


def _cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) a process has used so far; 0 where /proc is not available."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Meter:
    """CPU seconds each part (one or more processes) spent during one phase of the run."""

    def __init__(self, pids: dict[str, list[int | None]]) -> None:
        self.pids = pids

    def _now(self) -> dict[str, float]:
        return {name: sum(_cpu_s(pid) for pid in pids) for name, pids in self.pids.items()}

    def run(self, phase: Any) -> tuple[Any, dict[str, float]]:
        before = self._now()
        before["client"] = time.process_time()
        out = phase()
        spent = {name: cpu - before[name] for name, cpu in self._now().items()}
        spent["client"] = time.process_time() - before["client"]
        return out, spent


def _scrape(ports: list[int]) -> dict[str, float]:
    """The gateway histograms' _sum and _count, summed over the gateway processes."""
    import httpx

    wanted = ("response_start_seconds", "queued_seconds", "call_latency_seconds")
    out: dict[str, float] = {}
    for port in ports:
        for line in httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text.splitlines():
            name, _, value = line.partition(" ")
            base = name.split("{")[0]
            if (
                base.startswith("alight_gateway_")
                and base.endswith(("_sum", "_count"))
                and any(w in base for w in wanted)
            ):
                out[base] = out.get(base, 0.0) + float(value)
    return out


def _server_mean_ms(before: dict[str, float], after: dict[str, float], metric: str) -> float:
    count = after.get(f"alight_gateway_{metric}_count", 0) - before.get(f"alight_gateway_{metric}_count", 0)
    total = after.get(f"alight_gateway_{metric}_sum", 0) - before.get(f"alight_gateway_{metric}_sum", 0)
    return 1000 * total / count if count else float("nan")


def _feel(gateway: list[tuple[str, str]], ports: list[int], clients: int, total: int, stream: bool) -> str:
    """One line: what `clients` concurrent agents saw, next to what the gateway's metrics say."""
    starts: list[float] = []
    before = _scrape(ports)
    asyncio.run(_load(gateway[:clients], total, stream, starts=starts))
    after = _scrape(ports)
    mean = 1000 * statistics.fmean(starts)
    server = {m: _server_mean_ms(before, after, m) for m in ("response_start_seconds", "queued_seconds")}
    handler = _server_mean_ms(before, after, "call_latency_seconds")
    return (
        f"  {clients:3d} clients: client response start p50 {_pct(starts, 0.5):7.2f}  p99 {_pct(starts, 0.99):7.2f}"
        f"  mean {mean:7.2f} ms | server accept→response start mean {server['response_start_seconds']:7.2f}"
        f" (queued {server['queued_seconds']:.2f}), handler call latency mean {handler:7.2f} ms"
    )


def _print_sequential(title: str, results: dict[str, list[float]], labels: dict[str, str], goal_ms: float) -> None:
    print(title)
    for name, label in labels.items():
        print(f"  {label} p50 {_pct(results[name], 0.5):7.2f} ms  p99 {_pct(results[name], 0.99):7.2f} ms")
    medians = {name: statistics.median(values) * 1000 for name, values in results.items()}
    added = medians["gateway"] - medians["direct"]
    print(f"  added p50 latency: gateway {added:.2f} ms (goal < {goal_ms:g} ms), ", end="")
    print(f"bare proxy {medians['bare'] - medians['direct']:.2f} ms")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--requests", type=int, default=2000, help="calls per concurrent phase")
    parser.add_argument("--sequential", type=int, default=300, help="calls per sequential phase")
    parser.add_argument("--stream", action="store_true", help="streamed chat completions")
    parser.add_argument(
        "--upstream",
        choices=["raw", "fake"],
        default="raw",
        help="raw: a constant precomputed answer (the harshest baseline); fake: the vLLM-shaped test double",
    )
    parser.add_argument("--replicas", type=int, default=1, help="gateway processes sharing the store")
    parser.add_argument("--feel", default="1,100", help="client counts for the what-the-client-feels phase ('' skips)")
    args = parser.parse_args()
    feel = [int(n) for n in args.feel.split(",") if n.strip()]
    clients = max([args.concurrency, *feel])

    from alight.schemas import RolloutCreate, UpstreamCreate
    from alight_server.auth import derive_token_secret, issue_attempt_token
    from alight_server.serving import free_port
    from alight_server.store.sql import SqlStore

    tmp = Path(tempfile.mkdtemp(prefix="alight-bench-"))
    db_url = f"sqlite:///{tmp / 'alight.db'}"
    up_port, bare_port = free_port(), free_port()
    gw_ports = [free_port() for _ in range(args.replicas)]
    store = SqlStore(db_url)
    store.add_upstream(UpstreamCreate(id="bench", url=f"http://127.0.0.1:{up_port}/v1", model=MODEL))
    rollouts = store.create_rollouts([RolloutCreate(task={"i": i}) for i in range(clients)])
    claimed = store.claim_attempts(limit=clients, ids=[r.id for r in rollouts])
    secret = derive_token_secret(ADMIN_KEY)
    tokens = [(r.id, a, issue_attempt_token(secret, r.id, a, ttl_s=3600)) for r, a in claimed]
    store.close()

    ctx = mp.get_context("spawn")
    procs = [
        ctx.Process(target=run_upstream, args=(up_port, args.upstream)),
        ctx.Process(target=run_bare_proxy, args=(bare_port, up_port)),
        *(ctx.Process(target=run_gateway, args=(port, db_url)) for port in gw_ports),
    ]
    for p in procs:
        p.start()
    try:
        _wait(f"http://127.0.0.1:{up_port}/v1/models")
        _wait(f"http://127.0.0.1:{bare_port}/v1/models")
        for port in gw_ports:
            _wait(f"http://127.0.0.1:{port}/metrics")
        direct = [(f"http://127.0.0.1:{up_port}/v1/chat/completions", "none")] * clients
        bare = [(f"http://127.0.0.1:{bare_port}/v1/chat/completions", "none")] * clients
        gateway = [
            (f"http://127.0.0.1:{gw_ports[i % len(gw_ports)]}/gw/{rid}/{n}/v1/chat/completions", tok)
            for i, (rid, n, tok) in enumerate(tokens)
        ]
        paths = {"direct": direct, "bare": bare, "gateway": gateway}

        for clients in paths.values():  # warm up every path
            asyncio.run(_load(clients[:4], 200, args.stream))
        meter = _Meter({"upstream": [procs[0].pid], "bare": [procs[1].pid], "gateway": [p.pid for p in procs[2:]]})
        seq = {name: asyncio.run(_load(c[:1], args.sequential, args.stream))[0] for name, c in paths.items()}
        real = {
            name: asyncio.run(_load(c[:1], args.sequential, args.stream, REALISTIC))[0] for name, c in paths.items()
        }
        con, cpu = {}, {}
        for name, c in paths.items():
            con[name], cpu[name] = meter.run(
                lambda c=c: asyncio.run(_load(c[: args.concurrency], args.requests, args.stream))
            )
        felt = [_feel(gateway, gw_ports, n, max(args.sequential, 2 * n), args.stream) for n in feel]
    finally:
        for p in procs:
            p.terminate()
            p.join(10)

    store = SqlStore(db_url)
    recorded = sum(len(store.list_model_calls(rid, n)) for rid, n, _ in tokens)
    store.close()
    expected = 200 + 2 * args.sequential + args.requests + sum(max(args.sequential, 2 * n) for n in feel)
    kind = "streamed" if args.stream else "non-streamed"
    replicas = f", {args.replicas} gateway processes" if args.replicas > 1 else ""
    print(
        f"gateway benchmark: {kind} chat completions, {args.upstream} upstream, SQLite capture{replicas}, "
        f"{mp.cpu_count()} CPUs"
    )
    labels = {"direct": "direct ", "bare": "bare   ", "gateway": "gateway"}
    _print_sequential(f"sequential ({args.sequential} calls, 1 client):", seq, labels, 2.0)
    title = (
        f"sequential, realistic body ({args.sequential} calls, 1 client, 4 messages of 30-40 words, 32-token reply):"
    )
    _print_sequential(title, real, labels, 1.2)
    print(f"concurrent ({args.requests} calls, {args.concurrency} clients):")
    rate = {}
    for name, label in labels.items():
        latencies, wall = con[name]
        rate[name] = len(latencies) / wall
        print(
            f"  {label} {rate[name]:8.0f} calls/s  p50 {_pct(latencies, 0.5):7.2f} ms  p99 {_pct(latencies, 0.99):7.2f} ms"
        )
    print(f"  throughput ratio gateway/direct: {rate['gateway'] / rate['direct']:.2f} (goal >= 0.50)")
    print(f"  bare proxy/direct: {rate['bare'] / rate['direct']:.2f} (the ceiling of a proxy on this HTTP stack here)")
    print(f"  gateway/bare proxy: {rate['gateway'] / rate['bare']:.2f}")
    per_call = {name: {k: 1000 * v / args.requests for k, v in spent.items()} for name, spent in cpu.items()}
    print("  CPU ms per call (concurrent phase):")
    for name, own in (("direct", None), ("bare", "bare"), ("gateway", "gateway")):
        parts = f"client {per_call[name]['client']:.2f} + upstream {per_call[name]['upstream']:.2f}"
        if own:
            parts += f" + {'bare proxy' if own == 'bare' else 'gateway'} {per_call[name][own]:.2f}"
        print(f"    {labels[name]} {parts}")
    if felt:
        print("what the client feels (gateway only; client-side vs the gateway's /metrics):")
        print("\n".join(felt))
    print(f"  load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"recorded model calls: {recorded} of {expected} sent through the gateway")


if __name__ == "__main__":
    main()
