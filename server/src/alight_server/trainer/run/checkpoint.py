"""Checkpoints: trainable weights, optimizer, step, RNG states and the data cursor, so `--resume` continues exactly.

A checkpoint is a folder `step-NNNNNN/`: `weights.safetensors` (every `trainable` dict of the payload, readable
without alight or pickle), `optimizer.pt` (only a resume needs it: by default only the newest checkpoint keeps
it) and `state.pt` (the rest). Folders written before the split (`state.pt` alone) load as they are."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

WEIGHTS, OPTIMIZER, STATE = "weights.safetensors", "optimizer.pt", "state.pt"
SEP = "::"  # between a tensor's place in the payload ("trainer/policies/a/trainable") and its name


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


def _split(payload: dict[str, Any], place: str = "") -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(the payload without weights and optimizer state, {place: weights dict}, {place: optimizer state})."""
    rest: dict[str, Any] = {}
    weights: dict[str, Any] = {}
    optimizer: dict[str, Any] = {}
    for key, value in payload.items():
        where = f"{place}/{key}" if place else str(key)
        if key == "trainable" and isinstance(value, dict):
            weights[where] = value
        elif key == "optimizer" and isinstance(value, dict):
            optimizer[where] = value
        elif isinstance(value, dict) and all(isinstance(k, str) for k in value):
            rest[key], inner_weights, inner_optimizer = _split(value, where)
            weights.update(inner_weights)
            optimizer.update(inner_optimizer)
        else:
            rest[key] = value
    return rest, weights, optimizer


def _put(payload: dict[str, Any], place: str, value: Any) -> None:
    *parents, last = place.split("/")
    for key in parents:
        payload = payload.setdefault(key, {})
    payload[last] = value


def _save_weights(weights: dict[str, dict[str, torch.Tensor]], path: Path) -> None:
    """One safetensors file; a tensor that shares another's memory (tied embeddings) is written once, and the
    names that alias it are kept in the file's metadata."""
    from safetensors.torch import save_file

    flat: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    seen: dict[tuple[int, tuple[int, ...], torch.dtype], str] = {}
    for place, named in weights.items():
        for name, tensor in named.items():
            key = f"{place}{SEP}{name}"
            if tensor.numel() and (same := seen.get((tensor.data_ptr(), tuple(tensor.shape), tensor.dtype))):
                aliases[key] = same
                continue
            if tensor.numel():
                seen[(tensor.data_ptr(), tuple(tensor.shape), tensor.dtype)] = key
            flat[key] = tensor.detach().contiguous()
    places = {place: sorted(named) for place, named in weights.items()}  # also the places of empty dicts
    save_file(flat, str(path), metadata={"aliases": json.dumps(aliases), "places": json.dumps(places)})


def _load_weights(path: Path) -> dict[str, dict[str, torch.Tensor]]:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt", device="cpu") as file:
        metadata = file.metadata() or {}
        flat = {key: file.get_tensor(key) for key in file.keys()}  # noqa: SIM118 (safe_open is no mapping)
    for alias, key in json.loads(metadata.get("aliases", "{}")).items():
        flat[alias] = flat[key]
    weights: dict[str, dict[str, torch.Tensor]] = {place: {} for place in json.loads(metadata.get("places", "{}"))}
    for key, tensor in flat.items():
        place, name = key.split(SEP, 1)
        weights.setdefault(place, {})[name] = tensor
    return weights


def save_checkpoint(
    directory: Path, step: int, payload: dict[str, Any], keep_last: int = 2, optimizer: str = "last"
) -> Path:
    """Write `step-XXXXXX/` atomically (temp folder, then rename), then prune: keep the newest `keep_last`, and
    (`optimizer="last"`) the optimizer state only in the newest."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"step-{step:06d}"
    staging = directory / f".step-{step:06d}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    rest, weights, optimizer_state = _split({**payload, "step": step, "rng": rng_state()})
    if weights:
        _save_weights(weights, staging / WEIGHTS)
    if optimizer_state:
        torch.save(optimizer_state, staging / OPTIMIZER)
    torch.save(rest, staging / STATE)  # last: a folder with state.pt is complete (`latest_checkpoint`)
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    kept = sorted(directory.glob("step-*"))
    for old in kept[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    if optimizer == "last":
        for old in kept[-keep_last:-1]:
            (old / OPTIMIZER).unlink(missing_ok=True)
    return final


def latest_checkpoint(directory: Path) -> Path | None:
    found = sorted(p for p in directory.glob("step-*") if (p / STATE).is_file())
    return found[-1] if found else None


def load_checkpoint(path: Path, optimizer: bool = True, resume: bool = False) -> dict[str, Any]:
    """The payload as saved; `optimizer=False` skips reading the optimizer state (init_from needs weights only);
    `resume=True` refuses a checkpoint whose optimizer state was dropped, since the run would not continue exactly."""
    if resume and not (path / OPTIMIZER).is_file() and (path / WEIGHTS).is_file():  # (state.pt alone: before the split)
        raise RuntimeError(
            f"--resume: {path} kept no optimizer state (with checkpoint.optimizer: last only the newest checkpoint "
            "keeps it, and a newer one was deleted); resume from a folder that holds optimizer.pt, or start a new "
            "run with --init-from on this one"
        )
    # weights_only=False: the payload holds RNG states and plain Python history, written by us.
    payload = torch.load(path / STATE, map_location="cpu", weights_only=False)
    if (path / WEIGHTS).is_file():
        for place, named in _load_weights(path / WEIGHTS).items():
            _put(payload, place, named)
    if optimizer and (path / OPTIMIZER).is_file():
        for place, state in torch.load(path / OPTIMIZER, map_location="cpu", weights_only=False).items():
            _put(payload, place, state)
    return payload
