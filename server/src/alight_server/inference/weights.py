"""Reading new policy weights (safetensors file or directory) and checking them against the live model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


class WeightsError(ValueError):
    """New weights that cannot be loaded into the served model; nothing was changed."""


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """All tensors of a .safetensors file, or of every .safetensors file in a directory (sharded checkpoints)."""
    from safetensors.torch import load_file

    path = Path(path).expanduser()
    if path.is_dir():
        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise WeightsError(f"no .safetensors files in directory {str(path)!r}; save with save_pretrained() first")
    elif path.is_file() and path.suffix == ".safetensors":
        files = [path]
    else:
        raise WeightsError(f"weights path {str(path)!r} is neither a .safetensors file nor a directory holding them")
    state: dict[str, torch.Tensor] = {}
    for file in files:
        try:
            state.update(load_file(str(file)))
        except Exception as exc:  # safetensors raises its own error types for truncated/corrupt files
            raise WeightsError(f"cannot read {str(file)!r}: {exc}") from exc
    return state


def check_state_dict(model: Any, state: dict[str, torch.Tensor]) -> None:
    """Every tensor must name an existing parameter or buffer with the same shape (a subset is fine)."""
    if not state:
        raise WeightsError("the new weights hold no tensors")
    targets = model.state_dict()
    unknown = sorted(set(state) - set(targets))
    if unknown:
        raise WeightsError(
            f"{len(unknown)} tensor(s) match no parameter of the served model, e.g. {unknown[:3]}; "
            f"expected names like {sorted(targets)[:3]} (a PEFT model must be merged first)"
        )
    wrong = [(k, tuple(v.shape), tuple(targets[k].shape)) for k, v in state.items() if v.shape != targets[k].shape]
    if wrong:
        name, got, want = wrong[0]
        raise WeightsError(f"tensor {name!r} has shape {got} but the served model expects {want}")
