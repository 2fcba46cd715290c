"""While `alight train` runs: the line it prints leads to the run's own live dashboard; a second server reads it too."""

from __future__ import annotations

import json
import stat

from alight_server.stacks.state import STATE_FILE
from tests.server.ui.conftest import Dashboard


def test_train_prints_its_dashboard_url_and_where_the_admin_key_is(dashboard: Dashboard) -> None:
    live = dashboard.live
    assert live.printed is not None, live.errors
    assert live.key_file is not None and live.key_file.name == STATE_FILE
    assert stat.S_IMODE(live.key_file.stat().st_mode) == 0o600
    port = json.loads(live.key_file.read_text())["server_port"]
    assert live.page_url == f"http://127.0.0.1:{port}/ui/#/run/{dashboard.run_id}"


def test_the_run_s_own_server_serves_the_dashboard_live_while_it_trains(dashboard: Dashboard) -> None:
    live = dashboard.live
    assert live.page_html is not None and "<title>alight dashboard</title>" in live.page_html, live.errors
    assert live.own is not None, live.errors
    assert live.own["run"]["id"] == dashboard.run_id and live.own["run"]["status"] == "running"
    assert live.own["run"]["steps_planned"] == 2


def test_a_second_alight_serve_on_the_run_s_store_reads_it_while_it_trains(dashboard: Dashboard) -> None:
    second = dashboard.live.second
    assert second is not None, dashboard.live.errors
    assert second["run"]["id"] == dashboard.run_id and second["run"]["status"] == "running"
    reported = {s.step for s in dashboard.store.list_run_steps(dashboard.run_id)}
    assert {s["step"] for s in second["steps"]} <= reported
