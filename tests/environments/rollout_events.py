"""A rollout's events of one kind as JSON, revealed, read through the SDK's client as the dashboard's API serves them."""

from __future__ import annotations

from typing import Any

from alight.client import AlightClient


def rollout_events(url: str, admin_key: str, rollout_id: str, kind: str) -> list[dict[str, Any]]:
    with AlightClient(url, admin_key) as client:
        return [e.model_dump(mode="json") for e in client.list_events(rollout_id, kind=kind, reveal=True)]
