"""Data-parallel ranks for the embedded backend: the process group, rank 0's commands, row shards, DDP/FSDP2.

Rank 0 runs the training loop (server, inference, agents); the other ranks only train. Each backend call on
rank 0 is announced to them (`World.announce`) and they run the same method (follower.py), so every collective
is entered by every rank. N ranks come from `trainer.world_size: N` (rank 0 starts ranks 1..N-1 itself, logs in
OUTPUT_DIR/logs/rank-K.log) or from `torchrun --nproc-per-node N -m alight train CONFIG`. Commands always travel
over a gloo group; where the ranks meet is rendezvous.py.
"""

from __future__ import annotations

import contextlib
import datetime
import heapq
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from alight_server.trainer.backends.rendezvous import (
    JoinError,
    await_ranks,
    exited_rank,
    host_store,
    launcher_store,
    ready_key,
    start_ranks,
)

if TYPE_CHECKING:
    from alight_server.trainer.config.run import TrainConfig

# Followers wait for rank 0 through a whole rollout phase between two commands: the command group's
# timeout is long. Training collectives, and the other ranks' wait for rank 0 at the start, are bounded
# (rank 0's wait for them is trainer.join_timeout_s: trainer/backends/rendezvous.py).
COMMAND_WAIT = datetime.timedelta(hours=12)
TRAIN_WAIT = datetime.timedelta(minutes=10)


@dataclass
class World:
    """This process's place among the ranks; the defaults are one process, no process group."""

    device: torch.device
    rank: int = 0
    size: int = 1
    strategy: str = "ddp"
    commands: Any = None  # gloo group for commands and metrics
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)  # ranks this process started
    logs: list[Path] = field(default_factory=list)

    @property
    def leader(self) -> bool:
        return self.rank == 0

    def announce(self, command: str, payload: Any = None) -> None:
        """On rank 0: tell the other ranks to run `command` (they receive `payload` too)."""
        if self.size == 1:
            return
        if (gone := exited_rank(self.workers, self.logs)) is not None:
            raise RuntimeError(gone)
        dist.broadcast_object_list([command, payload], src=0, group=self.commands)

    def receive(self) -> tuple[str, Any]:
        message: list[Any] = [None, None]
        dist.broadcast_object_list(message, src=0, group=self.commands)
        return message[0], message[1]

    def gather(self, value: Any) -> list[Any]:
        """Every rank's `value`, in rank order (on every rank)."""
        if self.size == 1:
            return [value]
        values: list[Any] = [None] * self.size
        dist.all_gather_object(values, value, group=self.commands)
        return values

    def close(self) -> None:
        """On rank 0: tell the other ranks to stop (unless one already has) and wait for those it started."""
        if self.size > 1 and dist.is_initialized():
            if self.leader and all(worker.poll() is None for worker in self.workers):
                with contextlib.suppress(RuntimeError):  # a rank gone (Ctrl-C reaches it too) has nothing to hear
                    self.announce("close")
            dist.destroy_process_group()
        for worker in self.workers:
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
        self.workers.clear()

    def abort(self) -> None:
        """After a failed join: stop the ranks this process started now (they would wait for it for TRAIN_WAIT)."""
        for worker in self.workers:
            worker.kill()
            worker.wait()
        self.workers.clear()


def join(config: TrainConfig) -> World:
    """Join (or start) the ranks this config asks for; one process when it asks for none."""
    from alight_server.trainer.backends.devices import pick_device

    base = pick_device(config.inference.device)
    launched = int(os.environ.get("WORLD_SIZE", "0"))  # set by torchrun, or by rank 0 for ranks it started
    wanted = config.trainer.world_size
    if launched and wanted and wanted != launched:
        raise RuntimeError(f"trainer.world_size is {wanted} but the launcher started {launched} ranks")
    size = launched or wanted or 1
    if size == 1:
        return World(device=base)
    if config.lora.enabled and config.trainer.strategy == "fsdp":
        raise RuntimeError("lora with trainer.strategy: fsdp is not supported yet; use strategy: ddp for LoRA")
    world = World(device=base, size=size, strategy=config.trainer.strategy)
    join_wait = datetime.timedelta(seconds=config.trainer.join_timeout_s)
    local_rank = 0
    if launched:
        world.rank = int(os.environ["RANK"])
        local_rank = int(os.environ.get("LOCAL_RANK", world.rank))
    if base.type == "cuda":
        world.device = torch.device("cuda", local_rank)
        torch.cuda.set_device(world.device)
    backend = "nccl" if base.type == "cuda" else "gloo"
    try:
        if launched:  # the other ranks wait for rank 0 as long as a training collective may: it starts its stack first
            store = launcher_store(world.rank, size, join_wait if world.leader else TRAIN_WAIT)
        else:
            store, port = host_store(size, join_wait)
            world.workers, world.logs = start_ranks(config, size, port)
        if world.leader:
            await_ranks(store, size, join_wait, world.workers, world.logs)
        else:
            store.set(ready_key(world.rank), "1")
        dist.init_process_group(backend, store=store, rank=world.rank, world_size=size, timeout=TRAIN_WAIT)
    except JoinError:
        world.abort()
        raise
    except Exception as exc:
        world.abort()
        logs = ", ".join(map(str, world.logs)) or "the launcher's output"
        raise RuntimeError(f"the {size} training ranks did not connect ({exc}); see {logs}") from exc
    world.commands = dist.new_group(backend="gloo", timeout=COMMAND_WAIT)
    return world


def shard_rows(lengths: list[int], ranks: int) -> list[list[int]]:
    """Rows split by tokens: longest first, each to the rank holding the fewest tokens so far (deterministic:
    every rank computes the same split)."""
    shards: list[list[int]] = [[] for _ in range(ranks)]
    heap = [(0, rank) for rank in range(ranks)]  # (tokens so far, rank)
    for row in sorted(range(len(lengths)), key=lambda r: (-lengths[r], r)):
        tokens, rank = heapq.heappop(heap)
        shards[rank].append(row)
        heapq.heappush(heap, (tokens + lengths[row], rank))
    return [sorted(shard) for shard in shards]


def parallelize(model: Any, world: World) -> Any:
    """DDP or FSDP2 around `model` (FSDP2 shards each decoder layer, then the rest); the model itself alone."""
    if world.size == 1:
        return model
    if world.strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[world.device.index] if world.device.type == "cuda" else None)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(world.device.type, (world.size,))
    layer_types = set(getattr(model, "_no_split_modules", None) or ())  # transformers names its decoder layers
    for module in model.modules():
        if type(module).__name__ in layer_types:
            fully_shard(module, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def unwrap(model: Any) -> Any:
    """The model under a DDP wrapper (FSDP2 shards in place: the model is its own module)."""
    return getattr(model, "module", model)
