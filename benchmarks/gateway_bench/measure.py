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


def cpu_times() -> tuple[int, int]:
    """(stolen, total) CPU ticks of the whole machine so far, from /proc/stat; (0, 0) where it is missing.

    Steal is time the hypervisor ran something else while a virtual CPU wanted to run: on a shared
    VM it is what turns the same work into two or four times the latency.
    """
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


def steal_share(before: tuple[int, int], after: tuple[int, int]) -> str:
    """The share of the machine's CPU time stolen between two `cpu_times()`, as a line's words."""
    total = after[1] - before[1]
    return f"{100 * (after[0] - before[0]) / total:.1f}%" if total > 0 else "unknown"
