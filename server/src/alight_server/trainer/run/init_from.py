"""`alight train --init-from CHECKPOINT`: a new run whose policy starts from another run's checkpoint.

The checkpoint's weights (LoRA merged in) become a plain Hugging Face folder in the new run's output folder, and
the run's `model` that folder; the optimizer starts fresh (a new phase, e.g. RL after supervised fine-tuning).
`--resume` is the other way in: the same run, optimizer and step included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from alight_server.trainer.run.checkpoint import latest_checkpoint, load_checkpoint

INIT_FOLDER = "init-policy"


def checkpoint_folder(path: Path) -> Path:
    """The `step-N` folder `path` names: itself, or the latest under a run folder or its `checkpoints/`."""
    if (path / "state.pt").is_file():
        return path
    found = latest_checkpoint(path / "checkpoints") or latest_checkpoint(path)
    if found is not None:
        return found
    raise ValueError(
        f"--init-from {str(path)!r}: no checkpoint there; name a run folder, its checkpoints/ folder or a "
        "checkpoints/step-N folder (one holding state.pt)"
    )


def export_policy(checkpoint: Path, model: str, out: Path) -> Path:
    """Write the checkpoint's policy as a Hugging Face folder `out` and return it; `model`: the new run's base.
    ValueError when the checkpoint trained another base model or was written by another backend."""
    from transformers import AutoTokenizer

    from alight_server.inference.models import load_policy, resolve_model
    from alight_server.trainer.backends.embedded import EmbeddedBackend
    from alight_server.trainer.config.sections import LoraConfig, OptimizerConfig
    from alight_server.trainer.step.algorithm import AlgorithmConfig

    step_folder = checkpoint_folder(checkpoint)
    run_json = step_folder.parent.parent / "run.json"  # the config its run trained with: model and LoRA settings
    if not run_json.is_file():
        raise ValueError(f"--init-from {str(step_folder)!r}: {run_json} is missing, so the base model is unknown")
    trained = json.loads(run_json.read_text())["config"]
    if resolve_model(trained["model"]).resolve() != resolve_model(model).resolve():
        raise ValueError(
            f"--init-from: {step_folder} trained model {trained['model']!r} but this config names {model!r}; "
            "set model to the checkpoint's base model"
        )
    state = load_checkpoint(step_folder, optimizer=False)["trainer"]
    if "policies" in state:
        raise ValueError(
            f"--init-from: {step_folder} trained several policies ({', '.join(state['policies'])}); start each "
            "policy from its adapter with policies.NAME.init_from instead"
        )
    if "trainable" not in state:
        raise ValueError(f"--init-from: {step_folder} was written by the verl backend; export its weights with verl")
    base, _ = load_policy(trained["model"], device="cpu")
    backend = EmbeddedBackend(base, OptimizerConfig(), AlgorithmConfig(), LoraConfig(**trained.get("lora", {})))
    backend.load_state_dict(state)
    weights = backend.policy_weights()  # LoRA merged, named like the plain model's
    backend.close()
    plain, _ = load_policy(trained["model"], device="cpu")
    plain.load_state_dict(weights)
    out.mkdir(parents=True, exist_ok=True)
    plain.save_pretrained(out)
    AutoTokenizer.from_pretrained(resolve_model(trained["model"])).save_pretrained(out)
    (out / "alight-init.json").write_text(json.dumps({"checkpoint": str(step_folder.resolve())}) + "\n")
    return out


def init_model(checkpoint: Path, model: str, output_dir: Path) -> str:
    """The `model` the new run trains: the exported folder (exported once; a --resume reuses it)."""
    out = output_dir / INIT_FOLDER
    if not (out / "config.json").is_file():
        export_policy(checkpoint, model, out)
    return str(out)


def checkpoint_adapter(checkpoint: Path, policy: str) -> dict[str, Any]:
    """`policies.NAME.init_from`: the LoRA adapter a checkpoint trained (from a several-policies one, the policy of
    the same name or its only one), named as `adapter_weights` names tensors; ValueError when it holds none."""
    step_folder = checkpoint_folder(checkpoint)
    state = load_checkpoint(step_folder, optimizer=False)["trainer"]
    if "policies" in state:
        trained = state["policies"]
        if policy not in trained and len(trained) != 1:
            raise ValueError(
                f"policies.{policy}.init_from: {step_folder} trained the policies {', '.join(trained)}, not "
                f"{policy!r}; name this policy like one of them"
            )
        state = trained.get(policy) or next(iter(trained.values()))
    if "trainable" not in state:
        raise ValueError(f"policies.{policy}.init_from: {step_folder} was written by the verl backend, not a LoRA")
    adapter = {name.replace(".default.", "."): tensor for name, tensor in state["trainable"].items() if "lora_" in name}
    if not adapter:
        raise ValueError(
            f"policies.{policy}.init_from: {step_folder} trained without LoRA, so holds no adapter; use "
            "--init-from for a whole policy"
        )
    return adapter
