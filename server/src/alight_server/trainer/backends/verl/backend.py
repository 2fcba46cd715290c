"""VerlBackend: one RL step by verl's FSDP actor on Ray, weights out through verl's sync to its rollout replicas.

Setup starts Ray (or joins `verl.ray_address`) and verl's `ActorRolloutRefWorker` group (the FSDP actor with its
vLLM or SGLang rollout fused in, verl's hybrid engine), and registers the rollout replicas as the gateway's
upstreams (replicas.py). A step trains the whole batch as one mini-batch: `updates_per_batch` epochs are as many
optimizer steps, micro-batches packed by `optimizer.micro_batch_tokens` (verl's dynamic batch size), while the
replicas sleep (they share the GPUs). Needs CUDA (or ROCm / NPU), verl and vLLM; see scripts/gpu_check.sh.
"""
# pyright: reportMissingImports=false
# (verl and omegaconf live in their own venv, .venv-verl; the type check runs in .venv)

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from alight.client import AlightClient
from alight_server.trainer.backends.teacher import load_teacher, score_batch
from alight_server.trainer.backends.verl.install import require_verl
from alight_server.trainer.backends.verl.replicas import ReplicaUpstreams
from alight_server.trainer.backends.verl.settings import VerlSettings
from alight_server.trainer.run.weight_sync import WeightSync
from alight_server.trainer.step.distill import distill_rewards
from alight_server.trainer.step.rendered import refuse_rendered
from alight_server.trainer.step.samples import SampleBatch

if TYPE_CHECKING:
    from alight_server.trainer.config.run import TrainConfig

log = logging.getLogger("alight.trainer")
POOL = "global_pool"


def pad_to_ranks(data: Any, ranks: int) -> Any:
    """`data` with extra rows up to a multiple of `ranks` (verl splits rows evenly); the extra rows train nothing."""
    from verl.protocol import pad_dataproto_to_divisor

    padded, extra = pad_dataproto_to_divisor(data, ranks)
    if extra:
        for key in ("response_mask", "rollout_is_weights", "advantages"):
            padded.batch[key][-extra:] = 0
    return padded


class VerlBackend:
    """The `TrainerBackend` for `trainer.backend: verl` (see the module docstring)."""

    def __init__(self, config: TrainConfig, settings: VerlSettings, client: AlightClient | None = None) -> None:
        require_verl()
        from omegaconf import OmegaConf
        from transformers import AutoTokenizer

        from alight_server.inference.models import resolve_model
        from alight_server.trainer.backends.verl.config import verl_config
        from alight_server.trainer.backends.verl.registry import register

        register()
        self.config, self.settings = config, settings
        distill = config.algorithm.distill
        self.teacher = load_teacher(distill, config.model, "cpu") if distill is not None else None
        self.model_path = resolve_model(config.model)
        self.verl = verl_config(config, settings, self.model_path)
        OmegaConf.resolve(self.verl)
        self.pad_token_id = int(AutoTokenizer.from_pretrained(self.model_path).pad_token_id or 0)
        self.updates = 0
        self.upstreams: ReplicaUpstreams | None = None
        try:
            self._start_ray()
            self._start_workers()
            self.checkpoints.update_weights(0)  # the replicas start with dummy weights (verl's load_format)
            if client is not None:
                self.attach(client)
        except BaseException:
            self.close()  # the loop never gets this backend to close: stop the Ray this started
            raise

    def attach(self, client: AlightClient) -> None:
        """Register the replicas with the alight server `client` speaks to (before the first rollout)."""
        self.upstreams = ReplicaUpstreams(client, self.replicas)
        self.upstreams.register(client.policy().current)

    def _start_ray(self) -> None:
        import ray
        from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

        if not ray.is_initialized():
            ray.init(address=self.settings.ray_address, runtime_env=get_ppo_ray_runtime_env(self.verl))

    def _start_workers(self) -> None:
        import ray
        from verl.checkpoint_engine import CheckpointEngineManager
        from verl.single_controller.ray import RayClassWithInitArgs, RayWorkerGroup, ResourcePoolManager
        from verl.trainer.ppo.utils import Role
        from verl.utils.config import omega_conf_to_dataclass
        from verl.utils.device import get_device_name
        from verl.workers.engine_workers import ActorRolloutRefWorker
        from verl.workers.rollout.llm_server import LLMServerManager

        cfg = self.verl
        pools = ResourcePoolManager(
            resource_pool_spec={POOL: [cfg.trainer.n_gpus_per_node] * cfg.trainer.nnodes},
            mapping={Role.ActorRollout: POOL},
        )
        try:
            pools.create_resource_pool()  # verl's own check that the Ray cluster has the GPUs asked for
        except ValueError as exc:
            gpus = cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes
            raise RuntimeError(
                f"the verl backend needs {gpus} GPU(s) (CUDA, ROCm or NPU: verl's platforms) in its Ray cluster "
                f"({exc}); set verl.n_gpus_per_node and verl.nnodes to what the cluster has, or train on this "
                "machine with trainer.backend: embedded"
            ) from exc
        pool = pools.get_resource_pool(Role.ActorRollout)
        worker = RayClassWithInitArgs(
            cls=ray.remote(ActorRolloutRefWorker), config=cfg.actor_rollout_ref, role=str(Role.ActorRollout)
        )
        self.workers = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=worker, device_name=get_device_name())
        self.workers.init_model()
        self.servers = LLMServerManager.create(config=cfg, worker_group=self.workers, rollout_resource_pool=pool)
        self.replicas = self.servers.get_replicas()
        self.checkpoints = CheckpointEngineManager(
            config=omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout.checkpoint_engine),
            actor_wg=self.workers,
            replicas=self.replicas,
        )

    def step(self, batch: SampleBatch) -> dict[str, float]:
        from verl.utils import tensordict_utils as tu
        from verl.utils.metric import reduce_metrics
        from verl.workers.utils.padding import left_right_2_no_padding

        from alight_server.trainer.backends.verl.data import to_data_proto
        from alight_server.trainer.backends.verl.registry import with_advantages, with_distill, with_token_weights

        algorithm = self.config.algorithm
        refuse_rendered(batch, algorithm)
        teacher_logprobs, distill = score_batch(self.teacher, batch, self.config.optimizer.micro_batch_tokens)
        rewards = None  # (R, T) the teacher's per-token reward
        if algorithm.distill is not None and teacher_logprobs is not None:
            rewards = distill_rewards(teacher_logprobs, batch.old_logprobs, batch.loss_mask, algorithm.distill.weight)
        data = to_data_proto(batch, self.pad_token_id, rewards)
        data = with_advantages(data, algorithm.estimator, algorithm.normalize_std)
        data = data if rewards is None else with_distill(data)
        data = with_token_weights(data, "token_mean" if algorithm.estimator == "sft" else algorithm.aggregation)
        data = pad_to_ranks(data, self.workers.world_size)
        data.meta_info.update(multi_turn=True, temperature=self.verl.actor_rollout_ref.rollout.temperature)
        self.checkpoints.sleep_replicas()  # hybrid engine: the rollout hands its GPU memory to training
        rows = len(data)
        batch_td = left_right_2_no_padding(data.to_tensordict())
        tu.assign_non_tensor(
            batch_td,
            calculate_entropy=False, distillation_use_topk=False, distillation_only=False,
            global_batch_size=rows, mini_batch_size=rows, epochs=algorithm.updates_per_batch,
            seed=self.config.seed, dataloader_kwargs={"shuffle": False}, compute_loss=True,
        )  # fmt: skip
        output = self.workers.update_actor(batch_td)
        self.updates += algorithm.updates_per_batch
        metrics = reduce_metrics(tu.get(output, "metrics"))
        out = {k.removeprefix("actor/").removeprefix("alight_"): float(v) for k, v in metrics.items()}
        out["updates"] = float(algorithm.updates_per_batch)
        return out | distill

    def push_weights(self, sync: WeightSync, metadata: dict[str, Any]) -> tuple[int, float]:
        if self.upstreams is None:
            self.attach(sync.client)
        assert self.upstreams is not None
        return self.upstreams.sync(sync, lambda: self.checkpoints.update_weights(self.updates), metadata)

    def state_dict(self) -> dict[str, Any]:
        """verl writes the FSDP shards and optimizer itself; the checkpoint keeps where, and the update count."""
        folder = Path(self.verl.trainer.default_local_dir) / f"global_step_{self.updates}" / "actor"
        self.workers.save_checkpoint(str(folder), global_step=self.updates)
        return {"verl_checkpoint": str(folder), "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "verl_checkpoint" not in state:
            raise ValueError("this checkpoint was written by another backend; resume it with that trainer.backend")
        self.workers.load_checkpoint(state["verl_checkpoint"])
        self.updates = int(state["updates"])

    def close(self) -> None:
        """Take the replicas out of the gateway, then stop Ray if this backend started it."""
        import ray

        try:
            # The run's ReplicaStack may have stopped its server first: the upstreams went with it.
            if self.upstreams is not None and not self.upstreams.client.http.is_closed:
                self.upstreams.remove()
        finally:
            if self.settings.ray_address is None and ray.is_initialized():
                ray.shutdown()
