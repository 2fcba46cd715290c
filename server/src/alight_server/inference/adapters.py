"""Several LoRA adapters over one base model: peft wraps the model once, each row of a batch names its adapter.

Each served model name maps to a peft adapter of the same name (an `AdapterSpec`), or to the base model
itself (`None`, peft's "__base__" row name). How one batch mixes adapters, and why the row-name hooks are
registered once at wrap time rather than per call as peft does: docs/inference.md "Several adapters". peft is
imported only when an engine has adapters.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from alight_server.inference.sampling import InvalidRequest
from alight_server.inference.weights import WeightsError

BASE = "__base__"  # peft's row name for "no adapter"
_calling = threading.local()  # .rows: the adapter name of each row of this thread's forward pass


@dataclass(frozen=True)
class AdapterSpec:
    """One LoRA adapter's shape: rank, alpha and the module names it wraps (as peft's LoraConfig takes them)."""

    r: int
    alpha: float
    target_modules: tuple[str, ...]


def lora_config(spec: AdapterSpec) -> Any:
    """peft's LoraConfig for `spec` (no dropout: serving only)."""
    from peft import LoraConfig

    alpha: Any = spec.alpha  # peft annotates an int; it only divides by r (the trainer's config gives an int)
    return LoraConfig(
        r=spec.r, lora_alpha=alpha, lora_dropout=0.0, target_modules=list(spec.target_modules), task_type="CAUSAL_LM"
    )


def wrap_with_adapters(model: Any, adapters: Mapping[str, AdapterSpec | None]) -> tuple[Any, dict[str, str]]:
    """The model wrapped in peft with one adapter per spec, in eval mode -> (peft model, served name -> row name).

    Served names whose spec is None map to the base ("__base__"); raises ValueError for no names or a bad name.
    """
    if not adapters:
        raise ValueError("adapters: name at least one model to serve")
    if BASE in adapters:
        raise ValueError(f"adapters: {BASE!r} is peft's name for the base model; give the policy another name")
    specs = {name: spec for name, spec in adapters.items() if spec is not None}
    rows = {name: (name if spec is not None else BASE) for name, spec in adapters.items()}
    if not specs:
        return model, rows  # only base names: nothing to wrap, no peft on the path
    from peft import get_peft_model

    first, *rest = specs.items()
    peft_model = get_peft_model(model, lora_config(first[1]), adapter_name=first[0])
    for name, spec in rest:
        peft_model.add_adapter(name, lora_config(spec))
    peft_model.eval()
    for p in peft_model.parameters():
        p.requires_grad_(False)
    from peft.tuners.lora import LoraLayer

    modules: list[torch.nn.Module] = list(peft_model.modules())
    for module in modules:
        if isinstance(module, LoraLayer):
            module.register_forward_pre_hook(_thread_rows, with_kwargs=True)
    return peft_model, rows


def _thread_rows(module: Any, args: Any, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    names = getattr(_calling, "rows", None)
    if names is not None:
        kwargs["adapter_names"] = names
    return args, kwargs


@contextmanager
def rows(names: list[str] | None) -> Iterator[None]:
    """Forward passes of this thread inside run row i under adapter names[i] (None: the model has no adapters)."""
    _calling.rows = names
    try:
        yield
    finally:
        _calling.rows = None


def adapter_tensors(model: Any, name: str) -> dict[str, torch.Tensor]:
    """The live LoRA tensors of adapter `name`, named as `get_peft_model_state_dict` names a one-adapter model's."""
    from peft import get_peft_model_state_dict

    # state_dict() tensors share storage with the parameters: copying into them changes the adapter.
    return get_peft_model_state_dict(model, adapter_name=name)


def check_adapter_tensors(
    targets: Mapping[str, torch.Tensor], name: str, tensors: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Every tensor must name a LoRA tensor of adapter `name`, with its shape and finite values (a subset is fine)."""
    if not tensors:
        raise WeightsError(f"the new weights of adapter {name!r} hold no tensors")
    state = dict(tensors)
    unknown = sorted(set(state) - set(targets))
    if unknown:
        raise WeightsError(
            f"tensor {unknown[0]!r} matches no LoRA tensor of adapter {name!r} ({len(unknown)} unknown); "
            f"expected names like {sorted(targets)[:2]} (peft.get_peft_model_state_dict of a one-adapter model)"
        )
    for key, tensor in state.items():
        if tensor.shape != targets[key].shape:
            raise WeightsError(
                f"tensor {key!r} of adapter {name!r} has shape {tuple(tensor.shape)} but the served adapter expects "
                f"{tuple(targets[key].shape)} (same lora r and target_modules?)"
            )
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise WeightsError(f"tensor {key!r} of adapter {name!r} holds NaN or infinite values")
    return state


def copy_adapter(targets: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor]) -> None:
    """Copy checked tensors into the live adapter (one no_grad copy each)."""
    with torch.no_grad():
        for key, tensor in state.items():
            targets[key].copy_(tensor)


class ServedAdapters:
    """What an engine with adapters serves: each name's peft row, each adapter's own version and live tensors."""

    def __init__(self, model: Any, specs: Mapping[str, AdapterSpec | None]) -> None:
        self.model, self.rows = wrap_with_adapters(model, specs)  # served name -> peft row name
        self.mixed = any(row != BASE for row in self.rows.values())  # False: base names only, nothing wrapped
        self.versions = {name: 0 for name, row in self.rows.items() if row != BASE}
        self._targets: dict[str, dict[str, torch.Tensor]] = {}

    def row(self, name: str | None) -> str | None:
        """The peft row a request for model `name` (None: the base) runs under; None when nothing is wrapped."""
        if name is not None and name not in self.rows:
            raise InvalidRequest(f"the model {name!r} does not exist; this engine serves {list(self.rows)}", "model")
        if not self.mixed:
            return None
        return self.rows[name] if name is not None else BASE

    def version(self, row: str | None, base_version: int) -> int:
        """What a row reports: its adapter's own version, or the base weights' for a base row."""
        return self.versions.get(row or BASE, base_version)

    def checked(
        self, name: str, tensors: Mapping[str, torch.Tensor]
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """(adapter `name`'s live tensors, `tensors` checked against them); WeightsError names what is wrong."""
        if name not in self.versions:
            raise WeightsError(
                f"adapter {name!r} is not a LoRA adapter of this engine; its adapters: {sorted(self.versions)}"
            )
        if name not in self._targets:  # views of the live tensors: found once (a walk of the whole model)
            self._targets[name] = adapter_tensors(self.model, name)
        return self._targets[name], check_adapter_tensors(self._targets[name], name, tensors)


def zero_adapter(model_dir: str | Path, spec: AdapterSpec) -> dict[str, torch.Tensor]:
    """A LoRA adapter of `spec` for the model in `model_dir` whose A and B are zero (the base model's outputs).

    Shapes come from peft wrapping the model built on the meta device: nothing is loaded or computed.
    """
    from peft import get_peft_model, get_peft_model_state_dict
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(model_dir)))
        state = get_peft_model_state_dict(get_peft_model(model, lora_config(spec)))
    return {name: torch.zeros(tensor.shape, dtype=torch.float32) for name, tensor in state.items()}


def write_adapter_folder(
    folder: Path, spec: AdapterSpec, tensors: Mapping[str, torch.Tensor], base_model: str | Path
) -> Path:
    """`folder` as peft's save_pretrained writes an adapter (adapter_config.json, adapter_model.safetensors)."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    config = lora_config(spec)
    config.base_model_name_or_path = str(base_model)
    config.save_pretrained(str(folder))
    # clone: views of one storage (or of live parameters) cannot be saved by safetensors
    save_file(
        {k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()},
        str(folder / "adapter_model.safetensors"),
    )
    return folder
