"""Inference engines side by side: alight's embedded engine and vLLM on the same model, in one run.

    .venv/bin/python benchmarks/inference.py [--model smollm2-135m] [--max-tokens 64] [--threads 1]
        [--dtype float32] [--engines embedded vllm] [--vllm-python .venv-vllm/bin/python] [--sequential]

1. Each engine serves the model on loopback (embedded: `create_inference_app` in this process; vLLM: the
   subprocess `inference.backend: vllm` starts, with LoRA enabled). Start-up time: from launch until
   /health answers (embedded: model load + server start).
2. Warm up, then for concurrency c in (1, 4, 16): c client threads each send one chat completion
   (max_tokens fixed, ignore_eos so every request generates the same number of tokens); generated
   tokens / wall time is the throughput. With --sequential, a baseline in the same run: the same 16
   requests one after another (the batching speedup is c=16 / sequential).
3. Weight-update latency: the trainer's full state dict (and, for vLLM, a rank-8 LoRA adapter on
   q/k/v/o) pushed the way `alight train` pushes it, without the gateway's pause (measured elsewhere).
4. The load average before and after: on a shared machine the absolute numbers move with it; the
   ratio of the two engines, measured back to back, moves less. Each load also reports tokens per
   CPU-second (this process, which holds the clients and the embedded engine, plus vLLM's process
   group): what the engine costs, which a busy machine moves far less than wall-clock tokens/s.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
from record import record

PROMPT = [{"role": "user", "content": "Write a short story about a robot who learns to paint."}]
CONCURRENCY = (1, 4, 16)


def _cpu_s(pgid: int | None) -> float:
    """CPU seconds used so far by this process and, if given, every live process of group `pgid`."""
    own = os.times()
    total = own.user + own.system
    if pgid is None:
        return total
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        if int(fields[2]) == pgid:  # fields[11], fields[12]: utime, stime in clock ticks
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _one(client: openai.OpenAI, model: str, max_tokens: int, index: int) -> int:
    response = client.chat.completions.create(
        model=model,
        messages=PROMPT,  # type: ignore[arg-type]
        max_tokens=max_tokens,
        temperature=1.0,
        seed=index,
        extra_body={"ignore_eos": True},
    )
    return response.usage.completion_tokens if response.usage else 0


def _load(
    client: openai.OpenAI, model: str, max_tokens: int, requests: int, concurrency: int, pgid: int | None
) -> tuple[float, float]:
    """(generated tokens per second, per CPU-second) for `requests` calls issued by `concurrency` threads."""
    start, cpu = time.perf_counter(), _cpu_s(pgid)
    with ThreadPoolExecutor(concurrency) as pool:
        tokens = sum(pool.map(lambda i: _one(client, model, max_tokens, i), range(requests)))
    return tokens / (time.perf_counter() - start), tokens / max(_cpu_s(pgid) - cpu, 1e-9)


BENCH_KEY = "benchmark-inference-key"  # the embedded server's /v1 key (every route needs one)


def measure(
    base_url: str, api_key: str, model: str, max_tokens: int, sequential: bool, pgid: int | None = None
) -> dict[str, float]:
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=3600)
    _load(client, model, 4, 2, 2, pgid)  # warm-up: first-call allocations, thread pools
    results = {}
    for c in CONCURRENCY:
        results[f"c{c}"], results[f"cpu{c}"] = _load(client, model, max_tokens, c, c, pgid)
        print(f"  {c} client(s): {results[f'c{c}']:.1f} tok/s, {results[f'cpu{c}']:.1f} tok/CPU-s", flush=True)
    if sequential:
        results["seq16"], _ = _load(client, model, max_tokens, 16, 1, pgid)
    return results


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_embedded(args: argparse.Namespace) -> dict[str, float]:
    import torch

    from alight_server.inference.engine import InferenceEngine
    from alight_server.inference.server import create_inference_app
    from alight_server.stacks.server_thread import ServerThread

    start = time.perf_counter()
    dtype = None if args.dtype == "auto" else getattr(torch, args.dtype)
    engine = InferenceEngine.from_model_name(args.model, device="cpu", dtype=dtype)
    with engine, ServerThread(create_inference_app(engine, api_key=BENCH_KEY)) as url:
        results = {"startup_s": time.perf_counter() - start}
        results.update(measure(f"{url}/v1", BENCH_KEY, args.model, args.max_tokens, args.sequential))
        state = {k: v.detach().clone() for k, v in engine.model.state_dict().items()}
        results["update_full_s"] = _timed(lambda: engine.update_weights(state))
    return results


def run_vllm(args: argparse.Namespace) -> dict[str, float]:
    from alight_server.inference.models import load_policy, resolve_model
    from alight_server.inference.vllm_server import VllmLaunch, VllmServer, default_python
    from alight_server.inference.vllm_weights import VllmWeights
    from alight_server.stacks.server_thread import free_port

    work = Path(tempfile.mkdtemp(prefix="alight-bench-vllm-"))
    launch = VllmLaunch(
        model_dir=resolve_model(args.model), served_name=args.model, port=free_port(),
        python=args.vllm_python or default_python(), dtype=args.dtype, max_model_len=2048, lora_rank=8,
    )  # fmt: skip
    server = VllmServer(launch, work / "vllm.log", startup_timeout_s=1800)
    server.start()
    try:
        results = {"startup_s": server.startup_s or 0.0}
        assert server.process is not None
        results.update(
            measure(
                f"{server.url}/v1", launch.api_key, args.model, args.max_tokens, args.sequential, server.process.pid
            )
        )
        model, _ = load_policy(args.model, device="cpu")
        state = {k: v.detach() for k, v in model.state_dict().items()}
        full = VllmWeights(server.url, work, api_key=launch.admin_key)
        results["update_full_s"] = _timed(lambda: full.load(lambda: state, 1))
        from peft import LoraConfig, get_peft_model

        adapter = get_peft_model(
            model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
        )
        lora = VllmWeights(
            server.url, work, adapter=adapter, adapter_name=f"{args.model}-lora", api_key=launch.admin_key
        )
        lora.load_initial_adapter()
        results["update_lora_s"] = _timed(lambda: lora.load(lambda: {}, 2))
    finally:
        server.stop()
    return results


def _row(label: str, r: dict[str, float]) -> str:
    cells = " | ".join(f"{r[f'c{c}']:.1f} ({r[f'cpu{c}']:.1f})" for c in CONCURRENCY)
    lora = f"{r['update_lora_s']:.2f} s" if "update_lora_s" in r else "-"
    batching = f"x{r['c16'] / r['seq16']:.2f}" if "seq16" in r else "-"
    return f"| {label} | {cells} | {batching} | {r['startup_s']:.0f} s | {r['update_full_s']:.2f} s | {lora} |"


def _recorded(r: dict[str, float]) -> str:
    """The engine's row in words: tok/s (tok/CPU-s) at each concurrency, batching, start-up, weight updates."""
    clients = "; ".join(f"{r[f'c{c}']:.1f} ({r[f'cpu{c}']:.1f}) at {c}" for c in CONCURRENCY)
    parts = [f"tok/s (tok per CPU-s) at 1/4/16 clients: {clients}"]
    if "seq16" in r:
        parts.append(f"16 concurrent vs 16 sequential x{r['c16'] / r['seq16']:.2f}")
    parts.append(f"start-up {r['startup_s']:.0f} s, full-weight update {r['update_full_s']:.2f} s")
    if "update_lora_s" in r:
        parts.append(f"LoRA update {r['update_lora_s']:.2f} s")
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--dtype", default="float32", choices=["auto", "float32", "bfloat16"])
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads of the embedded engine")
    parser.add_argument("--engines", nargs="+", default=["embedded", "vllm"], choices=["embedded", "vllm"])
    parser.add_argument("--sequential", action="store_true", help="also 16 requests one after another (slow)")
    parser.add_argument("--vllm-python", default=None, help="vLLM's interpreter (default: the repo's .venv-vllm)")
    parser.add_argument(
        "--record", action="store_true", help="append the results to benchmarks/results.jsonl (benchmarks/record.py)"
    )
    args = parser.parse_args()

    import torch

    if args.threads:
        # On a shared, oversubscribed CPU one thread avoids OpenMP spin-waits that make small matmuls slow.
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    print(f"{args.model}, {args.dtype}, max_tokens={args.max_tokens}, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), {os.cpu_count()} cores, load average {load_before[0]:.1f}")  # fmt: skip
    results = {}
    for name in args.engines:
        print(f"{name} (load average {os.getloadavg()[0]:.1f}):", flush=True)
        results[name] = (run_embedded if name == "embedded" else run_vllm)(args)
    print(f"load average after: {os.getloadavg()[0]:.1f} (before: {load_before[0]:.1f})\n")
    print("tokens/s (tokens per CPU-second); batching: 16 concurrent / 16 sequential (--sequential)")
    print("| engine | c=1 | c=4 | c=16 | batching | start-up | full-weight update | LoRA update |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        print(_row(name, r))
    ratios: list[str] = []
    if len(results) == 2:
        e, v = results["embedded"], results["vllm"]
        ratios = [f"x{v[f'c{c}'] / e[f'c{c}']:.2f} (x{v[f'cpu{c}'] / e[f'cpu{c}']:.2f})" for c in CONCURRENCY]
        print("| vllm / embedded | " + " | ".join(ratios) + " | | | | |")
    if args.record:
        setting = (
            f"{args.model}, {args.dtype}, {args.max_tokens}-token replies, {torch.get_num_threads()} torch threads"
        )
        for name, r in results.items():
            record("inference", f"{name} inference, {setting}", _recorded(r))
        if ratios:
            record(
                "inference", f"vLLM / embedded, {setting}", f"tok/s (per CPU-s) at 1/4/16 clients: {' / '.join(ratios)}"
            )


if __name__ == "__main__":
    main()
