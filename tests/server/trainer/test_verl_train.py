"""`alight train` with `trainer.backend: verl` on this CPU machine: as far as verl runs without a GPU.

1. The real path: the run's ReplicaStack (server + controller), the config translated, Ray started,
   verl's resource pool built, and verl's own GPU check refusing a machine without GPUs; the run stops
   with that error and leaves no server or Ray behind.
2. The same loop with only verl's GPU side replaced (`VerlBackend._start_ray` / `_start_workers`): the
   replicas are verl's `RolloutReplica` serving the vLLM-shaped fake upstream on loopback, the worker
   group records what `update_actor` gets, the checkpoint engine records when it loads. Everything
   else is real: agents run by the controller through the gateway, the sample builder, verl's
   `compute_advantage` with alight's registered estimator, verl's padding and no-padding layout,
   the gateway's pause -> drain -> resume, the checkpoint.
3. The same, with asynchronous rollouts: a held group carries over a verl update and is trained later,
   each of its calls recorded with the replica's version that served it.
"""
# pyright: reportMissingImports=false
# (verl and omegaconf live in their own venv, .venv-verl; the type check runs in .venv)

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from verl_fixtures import require_verl

from alight_server.stacks.opening import TrainingStacks
from alight_server.stacks.server_thread import ServerThread
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.run.loop import TrainingRun
from alight_server.trainer.run.rollout_source import PoolGroups
from alight_testing import create_fake_upstream

pytestmark = pytest.mark.verl
require_verl()

import ray  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.workers.rollout.replica import RolloutReplica  # noqa: E402

from alight_server.trainer.backends.verl.backend import VerlBackend  # noqa: E402

AGENT = Path(__file__).parent / "agents" / "two_turn_agent.py"


@pytest.fixture
def verl_run_config(tiny_config: Callable[..., TrainConfig]) -> Callable[..., TrainConfig]:
    """The trainer tests' tiny config on verl: no embedded-engine settings (verl refuses them)."""

    def make(**sections: Any) -> TrainConfig:
        agent = {"entrypoint": f"{AGENT}:main"}
        return tiny_config(trainer={"backend": "verl"}, inference=None, metrics=None, agent=agent, **sections)

    return make


def test_alight_train_with_verl_on_a_machine_without_gpus_stops_at_verls_gpu_check(
    tmp_path: Path, verl_run_config: Callable[..., TrainConfig]
) -> None:
    started: dict[str, Any] = {}
    original = VerlBackend._start_workers

    def recording(self: VerlBackend) -> None:
        started["ray"] = ray.is_initialized()
        started["upstreams"] = self.verl.actor_rollout_ref.rollout.name
        original(self)

    VerlBackend._start_workers = recording  # type: ignore[method-assign]
    run = TrainingRun(verl_run_config(), stacks=TrainingStacks(), show_progress=False)
    try:
        with pytest.raises(RuntimeError, match=r"needs 1 GPU\(s\).*Total available GPUs 0 is less than total desired"):
            run.run()
    finally:
        VerlBackend._start_workers = original  # type: ignore[method-assign]
    assert started == {"ray": True, "upstreams": "vllm"}
    assert not ray.is_initialized(), "the backend started Ray and did not stop it"
    port = json.loads((tmp_path / "run" / "stack.json").read_text())["server_port"]
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)


# -- the loop with verl's GPU side replaced ------------------------------------------------------------


class LoopbackReplica(RolloutReplica):
    """verl's RolloutReplica; `launch_servers` (vLLM on a GPU) replaced by the fake upstream on loopback."""

    async def launch_servers(self) -> None:
        self.thread = ServerThread(create_fake_upstream(model="policy"))
        self.thread.start()
        self._server_address = f"127.0.0.1:{self.thread.port}"


class RecordingWorkers:
    """Where verl's RayWorkerGroup of ActorRolloutRefWorker would run FSDP on GPUs: records its calls."""

    world_size = 2  # two data-parallel ranks: rows are padded to an even count

    def __init__(self) -> None:
        self.batches: list[Any] = []
        self.saved: list[tuple[str, int]] = []

    def update_actor(self, batch_td: Any) -> Any:
        self.batches.append(batch_td)
        rows = batch_td["input_ids"].size(0)
        return tu.get_tensordict({}, non_tensor_dict={"metrics": {"actor/alight_rows": [float(rows)]}})

    def save_checkpoint(self, local_path: str, global_step: int = 0) -> None:
        self.saved.append((local_path, global_step))


class RecordingCheckpoints:
    """Where verl's CheckpointEngineManager moves the actor's weights into the replicas on the GPUs."""

    def __init__(self, backend: VerlBackend) -> None:
        self.backend = backend
        self.loads: list[tuple[int, dict[str, Any] | None]] = []
        self.sleeps = 0

    def sleep_replicas(self) -> None:
        self.sleeps += 1

    def update_weights(self, global_steps: int) -> None:
        upstreams = self.backend.upstreams
        status = upstreams.client.gateway_status() if upstreams is not None else None
        self.loads.append((global_steps, status))
        if self.marks is not None:  # for agents that wait for an update (a file they can see)
            (self.marks / f"updated-{len(self.loads) - 1}").touch()

    marks: Path | None = None


def replace_verls_gpu_side(monkeypatch: pytest.MonkeyPatch, marks: Path | None = None) -> dict[str, Any]:
    """Replicas on loopback, recording workers and checkpoint engine; returns {"backend": ...} once started."""
    seen: dict[str, Any] = {}

    def start_workers(self: VerlBackend) -> None:
        rollout = self.verl.actor_rollout_ref.rollout
        self.replicas = [LoopbackReplica(0, rollout, model_config=None, gpus_per_node=1)]
        asyncio.run(self.replicas[0].launch_servers())
        self.workers = RecordingWorkers()
        self.checkpoints = RecordingCheckpoints(self)
        self.checkpoints.marks = marks
        seen["backend"] = self

    monkeypatch.setattr(VerlBackend, "_start_ray", lambda self: None)
    monkeypatch.setattr(VerlBackend, "_start_workers", start_workers)
    return seen


def test_alight_train_on_verl_trains_the_recorded_ids_and_serves_each_new_policy_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verl_run_config: Callable[..., TrainConfig]
) -> None:
    seen = replace_verls_gpu_side(monkeypatch)
    config = verl_run_config(validation={"every": 0})
    try:
        result = TrainingRun(config, stacks=TrainingStacks(), show_progress=False).run()
    finally:
        if "backend" in seen:
            seen["backend"].replicas[0].thread.stop()
    backend: VerlBackend = seen["backend"]
    workers, checkpoints = backend.workers, backend.checkpoints
    assert isinstance(workers, RecordingWorkers) and isinstance(checkpoints, RecordingCheckpoints)
    # verl's sync ran at start (dummy weights) and after each step with the gateway paused and drained
    u = config.algorithm.updates_per_batch  # optimizer steps per batch: verl's global step counts them
    assert [(steps, s and (s["paused"], s["in_flight"])) for steps, s in checkpoints.loads] == [
        (0, None), (u, (True, 0)), (2 * u, (True, 0)),
    ]  # fmt: skip
    assert result.policy_version == 2 and checkpoints.sleeps == 2
    # a checkpoint after each step (checkpoint.every: 1): verl writes its shards, alight's names the folder
    verl_dir = tmp_path / "run" / "verl"
    assert workers.saved == [(str(verl_dir / f"global_step_{k * u}" / "actor"), k * u) for k in (1, 2)]

    from alight.api_models import RolloutQuery
    from alight_server.stacks.run_store import open_run_store

    store = open_run_store(tmp_path / "run")  # with the data keys the run's server sealed content under
    try:
        calls = {}
        for rollout in store.list_rollouts(RolloutQuery(limit=1000)):
            for call in store.list_model_calls(rollout.id):
                calls.setdefault((rollout.mode.value, rollout.metadata["step"]), []).append(call)
    finally:
        store.close()
    # the replica served every call, step k's calls at policy version k - 1
    train_steps = sorted(k for k in calls if k[0] == "train")
    assert [{c.policy_version for c in calls[k]} for k in train_steps] == [{0}, {1}]
    assert {c.upstream for cs in calls.values() for c in cs} == {"verl-replica-0"}
    # the ids verl's actor got are the recorded calls: each trained row starts with a call's prompt + response
    for batch_td, key in zip(workers.batches, train_steps, strict=True):
        rows = [tuple(r.tolist()) for r in batch_td["input_ids"].unbind()]
        real = [r for r in rows if len(r) > 1]
        assert len(rows) % RecordingWorkers.world_size == 0
        for call in calls[key]:
            ids = tuple(call.prompt_token_ids + call.response_token_ids)
            assert any(r[: len(ids)] == ids for r in real), f"call {call.id}: its ids start no trained row"
        assert tu.get(batch_td, "epochs") == config.algorithm.updates_per_batch


def test_asynchronous_rollouts_on_verl_carry_a_held_group_across_an_update(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verl_run_config: Callable[..., TrainConfig]
) -> None:
    seen = replace_verls_gpu_side(monkeypatch, marks=tmp_path)
    config = verl_run_config(
        steps=3,
        tasks_per_step=1,
        group_size=2,
        dataset={"shuffle": False},
        validation={"every": 0},
        async_rollout={"enabled": True, "active_groups": 2, "max_staleness": 5},
    )
    # Group 0 makes its first call, then waits for the first update after step 1; the others run through.
    tasks = [{"word": "apple", "hold_until": str(tmp_path / "updated-1")}, *({"word": w} for w in ["river"] * 6)]
    run = TrainingRun(config, stacks=TrainingStacks(), train_tasks=tasks, val_tasks=[], show_progress=False)
    try:
        result = run.run()
    finally:
        if "backend" in seen:
            seen["backend"].replicas[0].thread.stop()
    backend: VerlBackend = seen["backend"]
    assert isinstance(backend.workers, RecordingWorkers) and result.policy_version == 3
    assert isinstance(run.rollouts, PoolGroups)
    used = {group: (step, staleness) for step, group, staleness in run.rollouts.pool.used}
    held = next(g for g in used if "-g000000-" in g)
    step, staleness = used[held]
    assert step > 1 and staleness >= 1, used  # trained after the update it waited for, its staleness counted

    from alight.api_models import RolloutQuery
    from alight_server.stacks.run_store import open_run_store

    store = open_run_store(tmp_path / "run")  # with the data keys the run's server sealed content under
    try:
        held_calls = [
            store.list_model_calls(r.id) for r in store.list_rollouts(RolloutQuery(limit=1000)) if r.group_id == held
        ]
    finally:
        store.close()
    assert len(held_calls) == 2
    for calls in held_calls:  # each call with the version of the replica's weights that served it
        assert calls[0].policy_version == 0 and (calls[-1].policy_version or 0) >= 1
    # the step that trained the held group got both its rollouts' ids: a group is trained whole
    batch = backend.workers.batches[step - 1]
    rows = [tuple(r.tolist()) for r in batch["input_ids"].unbind()]
    for calls in held_calls:
        ids = tuple(calls[0].prompt_token_ids + calls[0].response_token_ids)
        assert any(r[: len(ids)] == ids for r in rows), "a held rollout's first call starts no trained row"
