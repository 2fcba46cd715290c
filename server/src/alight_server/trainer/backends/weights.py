"""The embedded policy's weights as others take them: LoRA set-up, merged tensors named like the served model's
for inference, and the LoRA adapter alone, out (`engine.update_adapter`, a peft folder) and in (`init_from`)."""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

from alight_server.trainer.backends.distributed import World, unwrap
from alight_server.trainer.config.sections import LoraConfig


def with_lora(model: Any, lora: LoraConfig) -> Any:
    """`model` wrapped by peft with a fresh LoRA adapter as `lora` configures it."""
    try:
        from peft import LoraConfig as PeftLoraConfig
        from peft import get_peft_model
    except ImportError as exc:
        raise RuntimeError("LoRA needs peft: pip install 'alight-server[train]'") from exc
    peft_config = PeftLoraConfig(
        r=lora.r, lora_alpha=int(lora.alpha), lora_dropout=lora.dropout, target_modules=list(lora.target_modules)
    )
    return get_peft_model(model, peft_config)


def frozen_copy(model: Any) -> Any:
    """A copy of `model` in eval mode with no parameter trained (the KL reference)."""
    return copy.deepcopy(model).eval().requires_grad_(False)


def merged_weights(model: Any, lora: LoraConfig | None, world: World) -> dict[str, torch.Tensor]:
    """Detached tensors named like the plain model's (LoRA merged in); under FSDP2 gathered whole (every rank)."""
    if world.size > 1 and world.strategy == "fsdp":
        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        return {name: tensor for name, tensor in full.items() if isinstance(tensor, torch.Tensor)}
    model = unwrap(model)
    if lora is None:
        return {name: tensor.detach() for name, tensor in model.state_dict().items()}
    model.merge_adapter()
    try:
        state = model.get_base_model().state_dict()
        return {k.replace(".base_layer.", "."): t.detach().clone() for k, t in state.items() if "lora_" not in k}
    finally:
        model.unmerge_adapter()


def adapter_weights(model: Any, lora: LoraConfig | None, world: World) -> dict[str, torch.Tensor]:
    """The LoRA adapter alone, detached copies named as `peft.get_peft_model_state_dict` names a one-adapter
    model's (`...q_proj.lora_A.weight`): what `engine.update_adapter` and a peft folder take (one rank only)."""
    if lora is None:
        raise ValueError("adapter_weights: this policy trains without LoRA (lora.enabled: false), so has no adapter")
    if world.size > 1:
        raise ValueError("adapter_weights runs on one rank; several ranks hand merged weights (policy_weights)")
    from peft import get_peft_model_state_dict

    return {k: v.detach().clone() for k, v in get_peft_model_state_dict(unwrap(model)).items()}


def load_adapter(
    model: Any, own: dict[str, torch.Tensor], tensors: dict[str, torch.Tensor], device: torch.device
) -> None:
    """`tensors` (named as `adapter_weights` names them) into `model`'s adapter, whose own tensors are `own`.

    A ValueError names the first tensor that is missing, unexpected or of another shape (another LoRA rank or
    target modules)."""
    for name in sorted(own.keys() ^ tensors.keys()):
        where = "the adapter lacks" if name in own else "this policy's LoRA has no"
        raise ValueError(f"init_from: {where} tensor {name}; same base model, lora.r and lora.target_modules?")
    for name, tensor in tensors.items():
        if tensor.shape != own[name].shape:
            raise ValueError(
                f"init_from: tensor {name} is {tuple(tensor.shape)}, this policy's LoRA wants "
                f"{tuple(own[name].shape)}; set lora.r to the adapter's rank"
            )
    from peft import set_peft_model_state_dict

    set_peft_model_state_dict(unwrap(model), {k: v.to(device) for k, v in tensors.items()})
