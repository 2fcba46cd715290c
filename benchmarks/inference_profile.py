"""Where a decode step of the embedded engine spends its time: torch profiler at batch 1 and 16.

    .venv/bin/python benchmarks/inference_profile.py [--model smollm2-135m] [--batches 1 16] [--steps 16] [--threads 1]

1. Prefill one prompt, put it in a `DecodeBatch` B times (what the engine does for B requests).
2. Warm up two steps, then profile `--steps` decode steps (the engine's forward pass, no sampling).
3. Print ms per step, tokens/s it implies, and the ops with the most self CPU time, grouped by kind:
   matmul (`aten::addmm`/`mm`/`linear`), attention (`scaled_dot_product_attention`), and everything else
   (elementwise ops, cache concatenation, Python dispatch), which at batch 1 is the sign of overhead.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

MATMUL = ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear")
ATTENTION = ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention_for_cpu")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 16])
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from torch.profiler import ProfilerActivity, profile

    from alight_server.inference.batching import DecodeBatch, prefill
    from alight_server.inference.models import load_policy

    model, tokenizer = load_policy(args.model, device="cpu", dtype=getattr(torch, args.dtype))
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Write a short story about a robot who learns to paint."}],
        add_generation_prompt=True, tokenize=False,
    )  # fmt: skip
    prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
    print(f"{args.model} {args.dtype}, {args.threads} thread(s), load average {os.getloadavg()[0]:.1f}")
    with torch.inference_mode():
        for batch_size in args.batches:
            layers, logits = prefill(model, list(prompt), torch.device("cpu"))
            batch = DecodeBatch(model, torch.device("cpu"))
            batch.add(layers, [int(logits.argmax())] * batch_size)
            for _ in range(2):
                batch.next_token = batch.step().argmax(-1)
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                start = time.perf_counter()
                for _ in range(args.steps):
                    batch.next_token = batch.step().argmax(-1)
                seconds = (time.perf_counter() - start) / args.steps
            events = prof.key_averages()
            total = sum(e.self_cpu_time_total for e in events) or 1.0
            share = {
                "matmul": sum(e.self_cpu_time_total for e in events if e.key in MATMUL) / total,
                "attention": sum(e.self_cpu_time_total for e in events if e.key in ATTENTION) / total,
            }
            share["other ops + dispatch"] = 1 - share["matmul"] - share["attention"]
            calls = sum(e.count for e in events) / args.steps
            print(f"\nbatch {batch_size}: {seconds * 1000:.1f} ms/step = {batch_size / seconds:.1f} tok/s; "
                  f"{calls:.0f} profiled op calls per step; self-CPU share: "
                  + ", ".join(f"{k} {v:.0%}" for k, v in share.items()))  # fmt: skip
            print(events.table(sort_by="self_cpu_time_total", row_limit=10))


if __name__ == "__main__":
    main()
