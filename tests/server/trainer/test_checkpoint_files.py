"""A checkpoint's files: weights as safetensors, the optimizer state only in the newest, `keep_last` folders kept."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from policies_fixtures import digest
from safetensors import safe_open

from alight_server.trainer.backends.embedded import EmbeddedBackend
from alight_server.trainer.backends.policy_set import make_policy_set
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.run.checkpoint import load_checkpoint, save_checkpoint
from alight_testing.batches import batch_for


def trained_backend(config: TrainConfig) -> EmbeddedBackend:
    backend = make_policy_set(config).one
    assert isinstance(backend, EmbeddedBackend)
    backend.step(batch_for(backend.model))  # AdamW's state exists after the first step
    return backend


def test_weights_are_safetensors_and_only_the_newest_checkpoint_keeps_the_optimizer(
    tiny_config: Callable[..., TrainConfig], tmp_path: Path
) -> None:
    backend = trained_backend(tiny_config())
    folder = tmp_path / "checkpoints"
    for step in (1, 2, 3):
        save_checkpoint(folder, step, {"trainer": backend.state_dict()}, keep_last=2)

    assert sorted(p.name for p in folder.iterdir()) == ["step-000002", "step-000003"]
    assert sorted(p.name for p in (folder / "step-000003").iterdir()) == [
        "optimizer.pt", "state.pt", "weights.safetensors",
    ]  # fmt: skip
    assert sorted(p.name for p in (folder / "step-000002").iterdir()) == ["state.pt", "weights.safetensors"]
    with safe_open(str(folder / "step-000003" / "weights.safetensors"), framework="pt") as file:
        assert any(key.endswith("model.embed_tokens.weight") for key in file.keys())  # noqa: SIM118
    # state.pt holds neither weights nor optimizer: a few kilobytes beside them
    weights_bytes = (folder / "step-000003" / "weights.safetensors").stat().st_size
    assert (folder / "step-000003" / "state.pt").stat().st_size < weights_bytes / 10

    # what was saved comes back whole, tied embeddings included under each of their names
    saved, loaded = backend.state_dict(), load_checkpoint(folder / "step-000003")["trainer"]
    assert digest(loaded["trainable"]) == digest(saved["trainable"])
    assert loaded["optimizer"]["state"].keys() == saved["optimizer"]["state"].keys()
    assert "optimizer" not in load_checkpoint(folder / "step-000002")["trainer"]
    with pytest.raises(RuntimeError, match="kept no optimizer state"):
        load_checkpoint(folder / "step-000002", resume=True)


def test_optimizer_all_keeps_it_in_every_checkpoint(tiny_config: Callable[..., TrainConfig], tmp_path: Path) -> None:
    backend = trained_backend(tiny_config())
    for step in (1, 2):
        save_checkpoint(tmp_path, step, {"trainer": backend.state_dict()}, keep_last=2, optimizer="all")
    assert (tmp_path / "step-000001" / "optimizer.pt").is_file()


def test_a_lora_checkpoint_holds_the_adapter_alone(tiny_config: Callable[..., TrainConfig], tmp_path: Path) -> None:
    backend = trained_backend(tiny_config(lora={"enabled": True, "r": 2, "alpha": 4}))
    folder = save_checkpoint(tmp_path, 1, {"trainer": backend.state_dict()})
    with safe_open(str(folder / "weights.safetensors"), framework="pt") as file:
        names = list(file.keys())
    assert names and all("lora_" in name for name in names)
    restored = load_checkpoint(folder)["trainer"]["trainable"]
    assert all(torch.equal(restored[n], t) for n, t in backend.state_dict()["trainable"].items())
