"""The stacks `alight train` hands its training run (trainer/run/servers.py): which one a config asks for, opened in two steps.

Before the trainer loads: servers you run (`server.url`) are checked, verl's replica stack starts, or vLLM
starts spawning (minutes on a CPU, while the trainer loads). After it: the embedded stack, serving the
trainer's model with the embedded engine or the vLLM spawned before (with LoRA, the trainer's adapter).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alight_server.inference.models import resolve_model
from alight_server.inference.vllm_policy import VllmPolicy, policy_launch
from alight_server.inference.vllm_server import VllmLaunch, VllmServer, default_python
from alight_server.stacks.kinds import EmbeddedStack, ExternalStack, ReplicaStack
from alight_server.stacks.server_thread import free_port
from alight_server.stacks.state import STATE_FILE
from alight_server.trainer.backends.base import TrainerBackend
from alight_server.trainer.backends.policy_set import PolicySet
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.run.policy_engine import engine_adapters, policy_engine
from alight_server.trainer.run.servers import RunStack
from alight_server.ui import run_link


class TrainingStacks:
    """A `StackOpener` for one run (trainer/run/servers.py)."""

    def __init__(self) -> None:
        self._vllm: VllmPolicy | None = None  # spawned early; owned by the embedded stack once that exists

    def open_servers(self, config: TrainConfig, run_dir: Path) -> RunStack | None:
        if config.server.url is not None:  # check the servers first: a wrong URL or key fails in seconds
            vllm = config.inference.backend == "vllm"
            return ExternalStack(config.server, config.model, run_dir, config.evaluator, vllm=vllm).start()
        if config.trainer.backend == "verl":  # the backend's rollout replicas register with this server
            return ReplicaStack(run_dir, **stack_options(config)).start()
        if config.inference.backend == "vllm":
            self._vllm = vllm_policy(config, run_dir)
            self._vllm.spawn()  # vLLM's start-up runs while the trainer loads
        return None

    def open_local(self, config: TrainConfig, run_dir: Path, backend: TrainerBackend | PolicySet) -> RunStack:
        engine = None
        if self._vllm is not None:  # with LoRA on, vLLM loads only the adapter of the trainer's PEFT model
            model = getattr(backend, "model", None) if getattr(backend, "lora", None) is not None else None
            self._vllm.adapter = getattr(model, "module", model)  # under DDP the PEFT model is the wrapper's module
        else:
            engine = policy_engine(config.model, config.inference, engine_adapters(config))
        stack = EmbeddedStack(engine, run_dir, vllm=self._vllm, **stack_options(config)).start()
        self._vllm = None
        return stack

    def link(self, stack: RunStack, run_id: str) -> str:
        key_file = stack.run_dir / STATE_FILE if isinstance(stack, EmbeddedStack) else None
        return run_link(stack.url, run_id, key_file)

    def abandon(self) -> None:
        if self._vllm is not None:  # the run failed between spawning vLLM and building its stack
            self._vllm.stop()
            self._vllm = None


def vllm_policy(config: TrainConfig, run_dir: Path, adapter: Any = None) -> VllmPolicy:
    """vLLM for a run, from the config's `inference.vllm`; `adapter` is the trainer's PEFT model when LoRA is on.

    The launch depends only on the config (LoRA on: one adapter of rank lora.r), so the server can be
    spawned before the trainer exists and `adapter` set once it does. With `policies:` each LoRA policy is one
    of vLLM's adapters (a zero adapter to start) and each frozen policy without LoRA a name of the base model.
    """
    settings = config.inference.vllm
    weights_dir, specs = run_dir / "vllm-weights", engine_adapters(config)
    served: dict[str, Any] = (
        {"lora_rank": config.lora.r if config.lora.enabled else None}
        if specs is None
        else policy_launch(weights_dir, resolve_model(config.model), specs)
    )
    launch = VllmLaunch(
        model_dir=resolve_model(config.model),
        served_name=config.model,
        port=settings.port or free_port(),
        python=settings.python or default_python(),
        dtype=config.inference.dtype,
        max_model_len=settings.max_model_len,
        kv_cache_gb=settings.kv_cache_gb,
        gpu_memory_utilization=settings.gpu_memory_utilization,
        enforce_eager=settings.enforce_eager,
        tool_call_parser=settings.tool_call_parser,
        extra_args=list(settings.extra_args),
        **served,
    )
    server = VllmServer(launch, log_path=run_dir / "logs" / "vllm.log", startup_timeout_s=settings.startup_timeout_s)
    adapters = {name: spec for name, spec in (specs or {}).items() if spec is not None}
    return VllmPolicy(server, config.model, weights_dir, adapter=adapter, adapter_specs=adapters)


def stack_options(config: TrainConfig) -> dict[str, Any]:
    """The embedded stack's settings from a training config: for training and for `alight eval` alike."""
    return dict(
        concurrency=config.controller.concurrency, train_temperature=config.inference.train_temperature,
        val_temperature=config.inference.val_temperature, evaluator=config.evaluator, environment=config.environment,
        max_output_tokens=config.inference.max_output_tokens, preload=config.controller.preload,
        routing=config.gateway_routing(), limits=config.limits,
    )  # fmt: skip
