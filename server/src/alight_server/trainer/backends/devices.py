"""Which device and dtype a policy lives on: shared by the embedded backend, its ranks and the embedded engine."""

from __future__ import annotations

import torch


def pick_device(device: str | None) -> torch.device:
    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


def pick_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """`auto`: bfloat16 on a GPU that supports it, float32 elsewhere (bf16 matmuls are slow on most CPUs)."""
    if dtype != "auto":
        return getattr(torch, dtype)
    return torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
