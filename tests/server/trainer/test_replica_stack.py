"""ReplicaStack: the run's server and controller without inference, for a backend that serves the policy itself."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from alight.schemas import UpstreamCreate
from alight_server.stacks.kinds import ReplicaStack


def test_the_replica_stack_runs_the_server_and_controller_but_registers_no_upstream(tmp_path: Path) -> None:
    with ReplicaStack(tmp_path / "run", concurrency=2) as stack:
        assert stack.client is not None and stack.client.ready()
        assert stack.client.list_upstreams() == []
        assert stack.controller is not None and stack.controller.concurrency == 2
        url = stack.url
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/readyz", timeout=5)


def test_its_weight_sync_runs_only_the_backends_own_load_inside_the_pause(tmp_path: Path) -> None:
    with ReplicaStack(tmp_path / "run") as stack:
        assert stack.client is not None
        sync = stack.weight_sync()
        with pytest.raises(ValueError, match="weight sync needs the embedded engine"):
            sync.push({})
        client = stack.client

        def load(version: int) -> int:  # what a backend's replicas do: load, then register at the version
            assert client.gateway_status()["paused"] is True
            client.add_upstream(UpstreamCreate(id="replica-0", url="http://127.0.0.1:9/v1", policy_version=version))
            return version

        version, _ = sync.paused(load, {"step": 1})
        assert version == 1 and client.policy().current == 1
        assert [(u.id, u.policy_version) for u in client.list_upstreams()] == [("replica-0", 1)]
