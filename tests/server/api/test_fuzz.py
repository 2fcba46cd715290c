"""Fuzz /api from the app's own OpenAPI document (valid and invalid inputs): no answer is ever a 5xx."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.stacks.server_thread import ServerThread
from alight_server.store.sql import SqlStore
from tests.conftest import ADMIN_KEY, LiveServer

# The document only: the server under test is the fuzzed_server fixture.
_doc: dict[str, Any] = create_app(ServerConfig(admin_key="doc-only", db_url="sqlite://")).openapi()
schema = schemathesis.openapi.from_dict(_doc).include(path_regex="^/api/")


# One test per operation, parametrized here rather than by schema.parametrize(): its items all share one node id
# under pytest 9, and pytest-xdist (scripts/test.sh) ran one of the 34 operations and dropped the rest.
OPERATIONS = [result.ok() for result in schema.get_all_operations()]  # pyright: ignore[reportAttributeAccessIssue]  (an Err raises: the app's own document is valid)


@pytest.fixture(scope="module")
def fuzzed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One live server for every operation: each fuzzes the store the ones before it left, as a real server's is."""
    config = ServerConfig(admin_key=ADMIN_KEY, db_url=f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'alight.db'}")
    store = SqlStore(config.db_url)
    app = create_app(config, store=store)
    try:
        with ServerThread(app) as url:
            yield LiveServer(url=url, admin_key=ADMIN_KEY, app=app, store=store, config=config)
    finally:
        store.close()


@pytest.mark.parametrize("operation", OPERATIONS, ids=[op.label for op in OPERATIONS])
@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],  # a failing case is reported as found, not replayed to shrink it
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data())
def test_no_request_gets_a_server_error(operation: Any, fuzzed_server: LiveServer, data: st.DataObject) -> None:
    # Valid and invalid inputs, as schema.parametrize() generated them.
    case: schemathesis.Case = data.draw(
        st.one_of(operation.as_strategy(GenerationMode.POSITIVE), operation.as_strategy(GenerationMode.NEGATIVE))
    )
    timeout = case.body.get("timeout_s") if isinstance(case.body, dict) else None
    if case.path.endswith("/wait") and isinstance(case.body, dict) and isinstance(timeout, int | float):
        case.body["timeout_s"] = min(float(timeout), 0.2)  # keep long-polls short
    try:
        response = case.call(base_url=fuzzed_server.url, headers=fuzzed_server.admin_headers(), timeout=10)
    except requests.Timeout:
        pytest.fail(f"{case.method} {case.formatted_path} got no answer in 10 s")
    assert response.status_code < 500, f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text}"
    if response.status_code >= 400:
        assert set(response.json()["error"]) == {"message", "type", "param", "code"}
