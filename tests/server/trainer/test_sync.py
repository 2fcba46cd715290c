"""Weight sync around a backend's own load: the gateway is paused while it runs, resumed after, version bumped once."""

from __future__ import annotations

from typing import Any

import pytest

from alight.client import AlightClient
from alight_server.trainer.run.weight_sync import WeightSync


def sync_for(live_server: Any) -> tuple[AlightClient, WeightSync]:
    client = AlightClient(live_server.url, admin_key=live_server.admin_key)
    return client, WeightSync(client, inference_url="http://127.0.0.1:9")  # the URL is unused by paused()


def test_a_backends_own_load_runs_inside_the_pause_and_bumps_the_policy_version(live_server: Any) -> None:
    client, sync = sync_for(live_server)
    seen: list[bool] = []
    version, seconds = sync.paused(lambda _version: seen.append(client.gateway_status()["paused"]), {"step": 1})
    assert seen == [True]  # the load ran while new model calls were being held off
    assert not client.gateway_status()["paused"]
    assert version == client.policy().current == 1 and seconds >= 0


def test_a_load_that_fails_resumes_the_gateway_on_the_old_policy_version(live_server: Any) -> None:
    client, sync = sync_for(live_server)

    def broken(_version: int) -> None:
        raise RuntimeError("replica refused the weights")

    with pytest.raises(RuntimeError, match="replica refused"):
        sync.paused(broken)
    assert not client.gateway_status()["paused"]
    assert client.policy().current == 0
