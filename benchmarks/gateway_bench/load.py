"""The benchmark's load client (one aiohttp session, N coroutines calling back to back) and its request bodies."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from gateway_bench.servers import MODEL

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
    messages: list[dict[str, str]],
    starts: list[float] | None,
) -> tuple[list[float], float]:
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


def load(
    urls_tokens: list[tuple[str, str]],
    total: int,
    stream: bool,
    messages: list[dict[str, str]] = SHORT,
    starts: list[float] | None = None,
) -> tuple[list[float], float]:
    """Each (url, token) pair is one client issuing calls back to back until `total` are done.

    Returns every call's latency (seconds) and the wall time; `starts`, when given, gets each
    call's time to its response start (headers in).
    """
    return asyncio.run(_load(urls_tokens, total, stream, messages, starts))
