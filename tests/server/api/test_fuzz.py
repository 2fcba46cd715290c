"""Fuzz /api from the app's own OpenAPI document (valid and invalid inputs): no answer is ever a 5xx."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, settings

from alight_server.app import create_app
from alight_server.config import ServerConfig

if TYPE_CHECKING:
    from tests.conftest import LiveServer

# The document only: the server under test is the live_server fixture.
_doc: dict[str, Any] = create_app(ServerConfig(admin_key="doc-only", db_url="sqlite://")).openapi()
schema = schemathesis.openapi.from_dict(_doc).include(path_regex="^/api/")


@schema.parametrize()
@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],  # a failing case is reported as found, not replayed to shrink it
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_no_request_gets_a_server_error(case: schemathesis.Case, live_server: LiveServer) -> None:
    timeout = case.body.get("timeout_s") if isinstance(case.body, dict) else None
    if case.path.endswith("/wait") and isinstance(case.body, dict) and isinstance(timeout, int | float):
        case.body["timeout_s"] = min(float(timeout), 0.2)  # keep long-polls short
    try:
        response = case.call(base_url=live_server.url, headers=live_server.admin_headers(), timeout=10)
    except requests.Timeout:
        pytest.fail(f"{case.method} {case.formatted_path} got no answer in 10 s")
    assert response.status_code < 500, f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text}"
    if response.status_code >= 400:
        assert set(response.json()["error"]) == {"message", "type", "code"}
