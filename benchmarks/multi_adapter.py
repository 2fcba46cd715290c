"""Several LoRA adapters in one embedded engine vs one engine per policy, the LoRA overhead, and the update stall.

    .venv/bin/python benchmarks/multi_adapter.py [--model smollm2-135m] [--calls 8] [--max-tokens 32]
        [--rounds 2] [--threads N]

In one process, in one run, each configuration generates the same `calls` greedy completions (half per
policy, ignore_eos so each generates max_tokens), all submitted at once:
- `adapters`: one engine, two LoRA adapters (rank 8 on q/k/v/o, non-zero B) over one base: every call in
  one decode batch (peft's mixed-adapter forward).
- `two engines`: one engine per policy, each with its own copy of the model (the "several small models"
  way; each model is what its merged adapter would be), both decoding at the same time.
- `no adapters`: one engine without LoRA (today's path): the baseline the LoRA overhead is measured on.
Configurations alternate for `rounds` rounds (the machine's load moves); tokens/s is the mean over rounds, and
tokens per CPU-second of this process (which holds every engine) moves far less with the load.
Memory: the bytes of the model parameters each configuration holds (the KV cache is the same for all).
Stall: B's rows decode (max_tokens 4x) while A's adapter is replaced `updates` times; the gaps between two
tokens of a B row (after its first), with the updates and in the same run without them, and the time the
engine thread spends between two steps on one update (copy and prefix-cache drop).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from alight_server.inference.adapters import AdapterSpec, adapter_tensors, copy_adapter
from alight_server.inference.engine import InferenceEngine
from alight_server.inference.models import load_policy
from alight_server.inference.sampling import SamplingParams

SPEC = AdapterSpec(r=8, alpha=16.0, target_modules=("q_proj", "k_proj", "v_proj", "o_proj"))
PROMPT = "Write a short story about a robot who learns to paint."


def trained(engine: InferenceEngine, name: str, seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {k: 0.02 * torch.randn(v.shape, generator=generator) for k, v in adapter_tensors(engine.model, name).items()}


def param_bytes(model: Any) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def cpu_s() -> float:
    own = os.times()
    return own.user + own.system


def generate(jobs: list[tuple[InferenceEngine, str | None]], max_tokens: int) -> tuple[float, float]:
    """Run every (engine, adapter) call at once -> generated tokens per second, per CPU-second of this process."""

    def one(job: tuple[InferenceEngine, str | None]) -> int:
        engine, adapter = job
        ids = engine.tokenizer(PROMPT)["input_ids"]
        params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True, adapter=adapter)
        return len(engine.generate(ids, params, timeout_s=3600)[0].token_ids)

    start, cpu = time.perf_counter(), cpu_s()
    with ThreadPoolExecutor(len(jobs)) as pool:
        tokens = sum(pool.map(one, jobs))
    return tokens / (time.perf_counter() - start), tokens / max(cpu_s() - cpu, 1e-9)


def gaps(engine: InferenceEngine, rows: int, max_tokens: int, updates: int) -> tuple[list[float], float]:
    """(every gap between two tokens of a B row, mean update_adapter latency) while A is updated `updates` times."""
    ids = engine.tokenizer(PROMPT)["input_ids"]
    stamps: list[list[float]] = [[] for _ in range(rows)]
    finished = [0]
    done = threading.Event()

    def sink_for(row: int) -> Any:
        def sink(event: Any) -> None:  # on the engine thread
            stamps[row].append(time.perf_counter())
            if isinstance(event, BaseException) or event.finish_reason:
                finished[0] += 1
                if finished[0] == rows:
                    done.set()

        return sink

    new = [trained(engine, "planner", 100 + i) for i in range(updates)]  # made before: the trainer hands them over
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True, adapter="executor")
    for row in range(rows):
        engine.submit(ids, params, sink_for(row))
    while min(len(s) for s in stamps) < 2:  # every B row decoding
        time.sleep(0.005)
    took = []
    for tensors in new:
        start = time.perf_counter()
        engine.update_adapter("planner", tensors)
        took.append(time.perf_counter() - start)
        time.sleep(0.05)
    done.wait(3600)
    return [b - a for s in stamps for a, b in itertools.pairwise(s[1:])], statistics.mean(took) if took else 0.0


def copy_cost(engine: InferenceEngine, repeats: int = 20) -> float:
    """Seconds the engine thread spends between two steps on one adapter update: the copy and the cache drop."""
    targets, state = adapter_tensors(engine.model, "planner"), trained(engine, "planner", 7)
    start = time.perf_counter()
    for _ in range(repeats):
        copy_adapter(targets, state)
        engine.prefix_cache.clear_scope("planner")
    return (time.perf_counter() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--updates", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    print(f"{args.model}, {args.calls} calls x {args.max_tokens} tokens, {torch.get_num_threads()} threads, "
          f"{os.cpu_count()} cores, load average {load_before:.1f}", flush=True)  # fmt: skip

    def engine(adapters: dict[str, AdapterSpec | None] | None = None) -> InferenceEngine:
        model, tokenizer = load_policy(args.model, device="cpu")
        return InferenceEngine(model, tokenizer, adapters=adapters, max_batch_size=32).start()

    mixed = engine({"planner": SPEC, "executor": SPEC})
    mixed.update_adapter("planner", trained(mixed, "planner", 1))
    mixed.update_adapter("executor", trained(mixed, "executor", 2))
    plain, own_a, own_b = engine(), engine(), engine()
    half = args.calls // 2
    jobs: dict[str, list[tuple[InferenceEngine, str | None]]] = {
        "adapters": [(mixed, "planner")] * half + [(mixed, "executor")] * (args.calls - half),
        "two engines": [(own_a, None)] * half + [(own_b, None)] * (args.calls - half),
        "no adapters": [(plain, None)] * args.calls,
    }
    for batch in jobs.values():
        generate(batch, 4)  # warm-up
    rates: dict[str, list[float]] = {name: [] for name in jobs}
    per_cpu: dict[str, list[float]] = {name: [] for name in jobs}
    for r in range(args.rounds):
        for name, batch in jobs.items():
            rate, cpu_rate = generate(batch, args.max_tokens)
            rates[name].append(rate)
            per_cpu[name].append(cpu_rate)
            print(f"  round {r + 1} {name}: {rate:.1f} tok/s, {cpu_rate:.1f} tok/CPU-s", flush=True)
    for extra in (plain, own_a, own_b):
        extra.stop()
    memory = {
        "adapters": param_bytes(mixed.model),
        "two engines": param_bytes(own_a.model) + param_bytes(own_b.model),
        "no adapters": param_bytes(plain.model),
    }
    quiet, _ = gaps(mixed, half, args.max_tokens * 4, 0)
    updated, update_s = gaps(mixed, half, args.max_tokens * 4, args.updates)
    apply_s = copy_cost(mixed)
    mixed.stop()

    mean = {name: statistics.mean(v) for name, v in rates.items()}
    cpu = {name: statistics.mean(v) for name, v in per_cpu.items()}
    print(f"\nload average after: {os.getloadavg()[0]:.1f} (before: {load_before:.1f})")
    print("| configuration | tokens/s (mean of rounds) | vs adapters | tokens/CPU-s | vs adapters | parameter memory |")
    print("|---|---|---|---|---|---|")
    for name in jobs:
        print(f"| {name} | {mean[name]:.1f} | x{mean[name] / mean['adapters']:.2f} | {cpu[name]:.1f} | "
              f"x{cpu[name] / cpu['adapters']:.2f} | {memory[name] / 2**20:.1f} MiB |")  # fmt: skip
    print(f"\nLoRA overhead: adapters / no adapters = x{mean['adapters'] / mean['no adapters']:.2f} tokens/s, "
          f"x{cpu['adapters'] / cpu['no adapters']:.2f} tokens/CPU-s")  # fmt: skip
    print(f"update_adapter: {update_s * 1000:.0f} ms from call to return (waits for the running step), of which "
          f"{apply_s * 1000:.2f} ms between two steps (copy + cache drop)")  # fmt: skip
    for label, g in (("without updates", quiet), (f"with {args.updates} updates of A", updated)):
        p50, worst = statistics.median(g) * 1000, max(g) * 1000
        print(f"B's inter-token gaps {label}: median {p50:.0f} ms, max {worst:.0f} ms")


if __name__ == "__main__":
    main()
