"""GPU check of the embedded trainer's CUDA path: tiny model from a seed, bf16, one step on 1 rank and on 2.

    .venv/bin/python scripts/gpu_embedded_step.py [--strategy ddp|fsdp] [--device cpu]

Needs torch with CUDA and transformers; no model download, no vLLM, no verl. Prints one line per
world size and exits non-zero when a step is not finite, changes no weight, or 2 ranks disagree with 1.
`--device cpu` runs the same check on CPU (float32, gloo, 2 ranks), to try the script itself.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

import torch

from alight_server.inference.models import load_policy
from alight_server.trainer.backends.embedded import make_embedded_backend
from alight_server.trainer.config.run import parse_config
from alight_testing.batches import batch_for


def one_step(
    folder: Path, world_size: int, strategy: str, device: str
) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    dtype = "bfloat16" if device == "cuda" else "float32"
    config = parse_config(
        {
            "model": "tiny",
            "dataset": {"train": "unused.jsonl"},
            "agent": {"command": ["true"]},
            "output_dir": str(folder / f"run-{world_size}"),
            "optimizer": {"lr": 1e-3, "micro_batch_tokens": 64},
            "inference": {"device": device, "dtype": dtype},
            "trainer": {"world_size": world_size, "strategy": strategy},
        },
        folder,
    )
    reference, _ = load_policy("tiny", device=device, dtype=getattr(torch, dtype))
    batch = batch_for(reference, rows=8, prompt=24, response=8)
    backend = make_embedded_backend(config)
    try:
        metrics = backend.step(batch)
        trainable = backend.state_dict()["trainable"]
    finally:
        backend.close()
    base = {k: v.cpu() for k, v in reference.state_dict().items()}
    changed = sum(not torch.equal(t.cpu(), base[n]) for n, t in trainable.items())
    print(
        f"world_size={world_size} strategy={strategy} device={device} dtype={dtype} loss={metrics['loss']:.6f} "
        f"grad_norm={metrics['grad_norm']:.4f} tensors_changed={changed}/{len(trainable)}"
    )
    if not all(math.isfinite(v) for v in metrics.values()) or changed == 0:
        sys.exit(f"world_size={world_size}: the step is not finite or changed no weight")
    return metrics, trainable


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--strategy", choices=["ddp", "fsdp"], default="ddp")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: this check is for a GPU machine (--device cpu tries the script on CPU)")
    with tempfile.TemporaryDirectory() as tmp:
        _, single = one_step(Path(tmp), 1, args.strategy, args.device)
        if args.device == "cuda" and torch.cuda.device_count() < 2:
            print("one GPU: the 2-rank step was not run")
            return
        _, pair = one_step(Path(tmp), 2, args.strategy, args.device)
        worst = max(float((pair[n].float() - t.float()).abs().max()) for n, t in single.items())
        print(f"2 ranks vs 1: max |param difference| {worst:.2e}")
        if worst > 1e-2:
            sys.exit("2 ranks disagree with 1 beyond bf16 rounding")


if __name__ == "__main__":
    main()
