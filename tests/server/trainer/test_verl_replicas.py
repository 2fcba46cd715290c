"""verl's rollout replicas behind a live alight server: registered as upstreams, synced inside pause -> drain -> resume.

The replicas are verl's own `RolloutReplica` class with only its GPU part replaced: `launch_servers`
starts the vLLM-shaped fake upstream on loopback instead of vLLM. The server, gateway, store and
clients are the real ones; the weight load is a function that records what the gateway looked
like while it ran (verl's CheckpointEngineManager.update_weights needs the GPU workers).
"""
# pyright: reportMissingImports=false
# (verl and omegaconf live in their own venv, .venv-verl; the type check runs in .venv)

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from verl_fixtures import require_verl, train_config

from alight.client import AlightClient
from alight.schemas import Mode, RolloutCreate
from alight_server.stacks.server_thread import ServerThread
from alight_server.trainer.backends.verl.settings import VerlSettings
from alight_server.trainer.run.weight_sync import WeightSync
from alight_testing import Faults, create_fake_upstream

pytestmark = pytest.mark.verl
require_verl()

from verl.workers.rollout.replica import RolloutReplica  # noqa: E402

from alight_server.trainer.backends.verl.config import verl_config  # noqa: E402
from alight_server.trainer.backends.verl.replicas import ReplicaUpstreams  # noqa: E402

CHAT = {"model": "whatever-the-agent-asks", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}


class LoopbackReplica(RolloutReplica):
    """verl's RolloutReplica; `launch_servers` (vLLM on a GPU) replaced by the fake upstream on loopback."""

    async def launch_servers(self) -> None:
        self.fake_app = create_fake_upstream(model="policy")
        self.thread = ServerThread(self.fake_app)
        self.thread.start()
        self._server_address = f"127.0.0.1:{self.thread.port}"


@pytest.fixture
def replicas(tmp_path) -> Iterator[list[LoopbackReplica]]:
    import asyncio

    rollout = verl_config(train_config(tmp_path), VerlSettings(), "/models/policy").actor_rollout_ref.rollout
    started = [LoopbackReplica(rank, rollout, model_config=None, gpus_per_node=1) for rank in range(2)]
    for replica in started:
        asyncio.run(replica.launch_servers())
    yield started
    for replica in started:
        replica.thread.stop()


@pytest.fixture
def client(live_server) -> Iterator[AlightClient]:
    with AlightClient(live_server.url, live_server.admin_key, timeout=60) as c:
        yield c


@pytest.fixture
def upstreams(client, replicas) -> ReplicaUpstreams:
    pool = ReplicaUpstreams(client, replicas)
    pool.register(client.policy().current)
    return pool


def attempts(client: AlightClient, n: int) -> list[Any]:
    rollouts = client.create_rollouts([RolloutCreate(task={"i": i}, mode=Mode.TRAIN) for i in range(n)])
    return client.claim_attempts(limit=n, ids=[r.id for r in rollouts])


def chat(attempt: Any) -> httpx.Response:
    headers = {"authorization": f"Bearer {attempt.token}"}
    return httpx.post(f"{attempt.gateway_base_url}/chat/completions", headers=headers, json=CHAT, timeout=60)


def recorded(client: AlightClient, attempt: Any) -> list[Any]:
    return [c.call for c in client.trajectory(attempt.rollout.id).calls]


def test_replicas_are_registered_as_upstreams_at_their_openai_base_urls(client, replicas, upstreams):
    registered = {u.id: (u.url, u.policy_version) for u in client.list_upstreams()}
    assert registered == {
        "verl-replica-0": (f"http://{replicas[0].server_address}/v1", 0),
        "verl-replica-1": (f"http://{replicas[1].server_address}/v1", 0),
    }


def test_agent_calls_through_the_gateway_reach_the_replicas_and_are_captured(client, replicas, upstreams):
    started = attempts(client, 6)
    assert all(chat(a).status_code == 200 for a in started)
    served = {c.upstream for a in started for c in recorded(client, a)}
    assert served <= {"verl-replica-0", "verl-replica-1"}
    answered = sum(len(r.fake_app.state.fake.calls) for r in replicas)
    assert answered == 6
    call = recorded(client, started[0])[0]
    assert call.response_token_ids and call.prompt_token_ids and call.policy_version == 0


def test_weights_load_with_the_gateway_paused_and_in_flight_calls_finished(client, replicas, upstreams):
    slow, late = attempts(client, 2)
    for replica in replicas:
        replica.fake_app.state.fake.faults = Faults(latency_s=1.0)
    in_flight: dict[str, httpx.Response] = {}
    caller = threading.Thread(target=lambda: in_flight.setdefault("slow", chat(slow)))
    caller.start()
    deadline = time.monotonic() + 10
    while client.gateway_status()["in_flight"] == 0:
        assert time.monotonic() < deadline, "the slow call never reached the gateway"
        time.sleep(0.02)
    seen: dict[str, Any] = {}

    def update_weights() -> None:  # stands in for verl's CheckpointEngineManager.update_weights
        seen["status"] = client.gateway_status()
        seen["slow_done"] = "slow" in in_flight
        seen["during_pause"] = chat(late)

    version, paused_s = upstreams.sync(WeightSync(client), update_weights, {"step": 1})
    caller.join()
    assert (seen["status"]["paused"], seen["status"]["in_flight"], seen["slow_done"]) == (True, 0, True)
    assert in_flight["slow"].status_code == 200
    assert seen["during_pause"].status_code == 429 and seen["during_pause"].headers["retry-after"]
    assert version == 1 and paused_s > 0
    assert client.gateway_status()["paused"] is False


def test_after_a_sync_the_replicas_serve_the_next_policy_version(client, upstreams):
    before, after = attempts(client, 2)
    assert chat(before).status_code == 200
    version, _ = upstreams.sync(WeightSync(client), lambda: None, {"step": 1})
    assert chat(after).status_code == 200
    assert version == client.policy().current == 1
    assert {u.id: u.policy_version for u in client.list_upstreams()} == {"verl-replica-0": 1, "verl-replica-1": 1}
    assert [c.policy_version for c in recorded(client, before)] == [0]
    assert [c.policy_version for c in recorded(client, after)] == [1]
    assert client.policy().versions[-1].metadata == {"step": 1}


def test_a_failed_weight_load_resumes_the_gateway_without_a_new_version(client, upstreams):
    def broken() -> None:
        raise RuntimeError("NCCL timeout")

    with pytest.raises(RuntimeError, match="NCCL timeout"):
        upstreams.sync(WeightSync(client), broken)
    status = client.gateway_status()
    assert (status["paused"], status["policy_version"]) == (False, 0)
    assert {u.policy_version for u in client.list_upstreams()} == {0}
    [attempt] = attempts(client, 1)
    assert chat(attempt).status_code == 200


def test_closing_takes_the_replicas_out_of_the_gateway(client, upstreams):
    upstreams.remove()
    assert client.list_upstreams() == []
