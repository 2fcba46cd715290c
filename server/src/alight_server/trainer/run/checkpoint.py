"""Checkpoints: trainable weights, optimizer, step, RNG states and the data cursor, so `--resume` continues exactly."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(directory: Path, step: int, payload: dict[str, Any], keep_last: int = 2) -> Path:
    """Write `step-XXXXXX/state.pt` atomically (temp folder, then rename) and prune old ones."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"step-{step:06d}"
    staging = directory / f".step-{step:06d}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    torch.save({**payload, "step": step, "rng": rng_state()}, staging / "state.pt")
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    for old in sorted(directory.glob("step-*"))[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(directory: Path) -> Path | None:
    found = sorted(p for p in directory.glob("step-*") if (p / "state.pt").is_file())
    return found[-1] if found else None


def load_checkpoint(path: Path) -> dict[str, Any]:
    # weights_only=False: the payload holds RNG states and plain Python history, written by us.
    return torch.load(path / "state.pt", map_location="cpu", weights_only=False)
