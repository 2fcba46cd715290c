"""`alight train --init-from`: what it refuses, with a message naming what to fix (the path that works is in
test_sft_from_traces.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from alight_server.trainer.run.init_from import checkpoint_folder, export_policy


def a_run(folder: Path, model: str, state: dict[str, object]) -> Path:
    step = folder / "checkpoints" / "step-000003"
    step.mkdir(parents=True)
    torch.save({"trainer": state, "step": 3}, step / "state.pt")
    (folder / "run.json").write_text(json.dumps({"run_id": "r", "config": {"model": model, "lora": {}}}))
    return step


def test_a_run_folder_means_its_latest_checkpoint(tmp_path: Path) -> None:
    step = a_run(tmp_path, "tiny", {})
    assert checkpoint_folder(tmp_path) == step
    assert checkpoint_folder(tmp_path / "checkpoints") == step
    assert checkpoint_folder(step) == step


def test_a_folder_without_a_checkpoint_is_refused_naming_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no checkpoint there; name a run folder, its checkpoints/ folder"):
        checkpoint_folder(tmp_path)


def test_a_checkpoint_of_another_base_model_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other-model"
    other.mkdir()
    (other / "config.json").write_text("{}")
    a_run(tmp_path / "run", str(other), {"trainable": {}})
    with pytest.raises(ValueError, match=r"trained model .*other-model.* but this config names 'tiny'"):
        export_policy(tmp_path / "run", "tiny", tmp_path / "out")


def test_a_verl_checkpoint_is_refused(tmp_path: Path) -> None:
    a_run(tmp_path / "run", "tiny", {"verl_checkpoint": "/somewhere", "updates": 3})
    with pytest.raises(ValueError, match="written by the verl backend"):
        export_policy(tmp_path / "run", "tiny", tmp_path / "out")
