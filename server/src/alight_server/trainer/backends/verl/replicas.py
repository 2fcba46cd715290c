"""verl's rollout replicas as the gateway's upstreams, and verl's weight sync inside the gateway's pause.

Each replica's OpenAI-compatible server is upstream `verl-replica-<rank>`, so agents keep calling the gateway and
every call is captured as on the embedded path. After verl's sync the replicas are registered again at the new
policy version, which the gateway then records for every call they serve.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from alight.client import AlightClient
from alight.schemas import Upstream, UpstreamCreate
from alight_server.trainer.run.weight_sync import WeightSync

log = logging.getLogger("alight.trainer")


def upstream_id(replica: Any) -> str:
    """Deterministic, so registering again replaces the same upstream."""
    return f"verl-replica-{replica.replica_rank}"


def upstream_url(replica: Any) -> str:
    """The replica's OpenAI base URL; verl gives `host:port` (IPv6 hosts already bracketed)."""
    address = str(replica.server_address)
    return (address if address.startswith(("http://", "https://")) else f"http://{address}") + "/v1"


class ReplicaUpstreams:
    """Registers verl's rollout replicas with the alight server and keeps their policy version current."""

    def __init__(self, client: AlightClient, replicas: Sequence[Any]) -> None:
        if not replicas:
            raise ValueError("verl started no rollout replica: check verl.n_gpus_per_node and tensor_parallel_size")
        self.client = client
        self.replicas = list(replicas)

    def register(self, policy_version: int) -> list[Upstream]:
        """Every replica as an upstream serving `policy_version` onward."""
        return [
            self.client.add_upstream(
                UpstreamCreate(id=upstream_id(r), url=upstream_url(r), policy_version=policy_version)
            )
            for r in self.replicas
        ]

    def remove(self) -> None:
        for replica in self.replicas:
            self.client.remove_upstream(upstream_id(replica))

    def sync(
        self, sync: WeightSync, update_weights: Callable[[], Any], metadata: dict[str, Any] | None = None
    ) -> tuple[int, float]:
        """`update_weights` (verl's sync) inside pause -> drain -> resume; returns (new version, seconds paused)."""

        def load(version: int) -> int:
            update_weights()
            self.register(version)  # the replicas are registered again as the version they now serve
            return version

        version, seconds = sync.paused(load, metadata)
        log.info("verl replicas serve policy version %d (paused %.2fs)", version, seconds)
        return version, seconds
