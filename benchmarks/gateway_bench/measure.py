"""What the gateway benchmark measures besides latency: CPU per process, the gateway's /metrics, percentiles."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def pct(values: list[float], q: float) -> float:
    """The q-quantile of latencies in seconds, in milliseconds."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) a process has used so far; 0 where /proc is not available."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Meter:
    """CPU seconds each part (one or more processes, and this load client) spent during one phase.

    Process CPU time is the steady number on a shared machine, where latency and calls/s move with
    whatever else runs.
    """

    def __init__(self, pids: dict[str, list[int | None]]) -> None:
        self.pids = pids

    def _now(self) -> dict[str, float]:
        return {name: sum(_cpu_s(pid) for pid in pids) for name, pids in self.pids.items()}

    def run(self, phase: Callable[[], T]) -> tuple[T, dict[str, float]]:
        before = self._now()
        before["client"] = time.process_time()
        out = phase()
        spent = {name: cpu - before[name] for name, cpu in self._now().items()}
        spent["client"] = time.process_time() - before["client"]
        return out, spent


def scrape(ports: list[int]) -> dict[str, float]:
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


def server_mean_ms(before: dict[str, float], after: dict[str, float], metric: str) -> float:
    """The mean of one gateway histogram over a phase, from two scrapes."""
    count = after.get(f"alight_gateway_{metric}_count", 0) - before.get(f"alight_gateway_{metric}_count", 0)
    total = after.get(f"alight_gateway_{metric}_sum", 0) - before.get(f"alight_gateway_{metric}_sum", 0)
    return 1000 * total / count if count else float("nan")
