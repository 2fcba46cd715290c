"""Imported rollouts are offline: stored ended with one attempt, so no controller ever claims or starts them."""

from __future__ import annotations

import pytest

from alight.client import AlightClient
from alight.schemas import AttemptStatus, RolloutCreate, RolloutState
from alight_server.store.base import Conflict
from alight_server.traces.formats import openai_log
from alight_server.traces.importer import import_traces
from tests.server.traces.conftest import log_conversation


def test_a_controller_claiming_work_never_gets_an_imported_rollout(tmp_path, live_server, upstream_url, renderer):
    path = tmp_path / "calls.jsonl"
    log_conversation(upstream_url, path, "call get_weather", ids=False)
    import_traces(live_server.store, "logs", "openai", openai_log.read([path]), renderer)
    (imported,) = live_server.store.list_rollouts()
    live_server.store.create_rollouts([RolloutCreate(id="queued-one", task={"q": 1})])
    with AlightClient(live_server.url, admin_key=live_server.admin_key) as client:
        claimed = client.claim_attempts(limit=100, runner="local")  # what `alight controller` asks for
        assert [start.rollout.id for start in claimed] == ["queued-one"]
        assert client.claim_attempts(limit=100, runner="local") == []
        offline = client.get_rollout(imported.id)
    assert offline.state == RolloutState.SUCCEEDED
    assert [(a.attempt, a.status, a.runner_handle) for a in offline.attempts] == [
        (1, AttemptStatus.SUCCEEDED, f"offline/{imported.id}/1")
    ]
    assert offline.runner is None and offline.metadata["offline"]["format"] == "openai"


def test_an_imported_id_reused_with_other_content_is_refused(store):
    store.add_offline_rollouts([RolloutCreate(id="logs-abc", task={"prompt": "a"})])
    with pytest.raises(Conflict, match="logs-abc"):
        store.add_offline_rollouts([RolloutCreate(id="logs-abc", task={"prompt": "b"})])
