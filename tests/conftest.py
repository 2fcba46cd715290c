"""Shared fixtures: stores (SQLite, PostgreSQL), a server config, a live server on loopback, clients."""

from __future__ import annotations

import os

# The test processes' environment, set before anything loads torch or starts a JVM (xdist workers and the `alight`
# subprocesses inherit it; a caller's own setting wins). Neither changes what a computation gives, only its CPU:
# - torch's OpenMP threads sleep when idle instead of spinning: with 3 workers on 2 cores a spinning thread burns
#   the core another needs (SmolLM2-135M, two 643-token forwards: 18.0-18.8 -> 7.1-7.5 CPU-s, 7 Dec 2026);
# - the simulators' JVMs (ScienceWorld, TextWorldExpress: one per attempt) live seconds, so C2, the optimising
#   compiler, only costs them CPU: C1 alone halved a ScienceWorld game's (8.4 -> 4.1 CPU-s).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")

import contextlib
import importlib.util
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.store.sql import SqlStore
from tests.longest_first import CpuMeter, DurationRecorder, order_longest_first

ADMIN_KEY = "alk_test-admin-key"


# Markers whose tests run only when selected with -m (minutes each): marker -> how to run them.
OPT_IN = {
    "soak": "soak drill: run with `pytest -m soak tests/server/drills` (docs/api.md)",
    "async_e2e": "async end-to-end run: pytest -m async_e2e tests/server/trainer (docs/training.md)",
    "examples_train": "one example trains in CI: pytest -m examples_train tests/integrations (docs/testing.md)",
    "word_problems_learning": "learning run: pytest -m word_problems_learning tests/examples (examples/word_problems)",
}


def pytest_configure(config: pytest.Config) -> None:
    # The run's per-file times (tests/longest_first.py), recorded where the reports all arrive: the controller.
    durations = os.environ.get("ALIGHT_TEST_DURATIONS")
    if durations and not hasattr(config, "workerinput"):
        config.pluginmanager.register(DurationRecorder(Path(durations)), "alight-test-durations")
    if durations:  # ... and each test's CPU seconds, measured where it runs (a worker, or this process)
        config.pluginmanager.register(CpuMeter(), "alight-test-cpu")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: its collection order is the schedule's
        order_longest_first(items)
    # pytest-xdist hands out tests by node id and runs a repeated id once: the others would pass unseen.
    repeated = sorted(nodeid for nodeid, n in Counter(item.nodeid for item in items).items() if n > 1)
    if repeated:
        raise pytest.UsageError(f"tests share a node id, and scripts/test.sh's workers would run each once: {repeated}")
    for item in items:
        # pytest-timeout's default stops a test by raising in it; Hypothesis catches that as a failing example and
        # replays it to shrink, with no timer left, so a hung request would hang the run for good. Those tests get
        # the timeout that dumps every thread's stack and ends the run instead.
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False) and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(float(config.getini("timeout")), method="thread"))
    selected = config.getoption("-m") or ""
    for marker, how in OPT_IN.items():
        if marker in selected:
            continue
        for item in items:
            if marker in item.keywords:
                item.add_marker(pytest.mark.skip(reason=how))


# pytest's whole run: past the budget it stops with a failure and its slowest tests listed, rather than being killed
# from outside with nothing said (CI's limit is 90 minutes for set-up and tests together; set-up takes about 15).
RUN_BUDGET_S = float(os.environ.get("ALIGHT_TEST_BUDGET_S", 60 * 60))
_RUN_STARTED = time.monotonic()


def pytest_runtest_teardown(item: pytest.Item) -> None:
    if time.monotonic() - _RUN_STARTED > RUN_BUDGET_S:
        item.session.shouldfail = (
            f"the test run passed its budget of {RUN_BUDGET_S / 60:.0f} minutes at {item.nodeid} "
            "(ALIGHT_TEST_BUDGET_S; --durations lists the slowest)"
        )


@pytest.fixture(autouse=True)
def _agents_sdk_defaults_do_not_leak() -> Iterator[None]:
    """The OpenAI Agents SDK keeps process-wide defaults (client, key, Responses or chat, transport): each test
    starts from the SDK's own defaults, so none talks to a server an earlier test set and stopped."""
    yield
    shared = sys.modules.get("agents.models._openai_shared")
    if shared is None:
        return
    if not _AGENTS_DEFAULTS:  # the module's values as it sets them itself, read from a fresh copy of it
        spec = importlib.util.find_spec(shared.__name__)
        assert spec is not None and spec.loader is not None
        fresh = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(fresh)
        _AGENTS_DEFAULTS.update({k: v for k, v in vars(fresh).items() if k.startswith(("_default_", "_use_"))})
    for name, value in _AGENTS_DEFAULTS.items():
        setattr(shared, name, value)


_AGENTS_DEFAULTS: dict[str, object] = {}


@pytest.fixture(scope="session")
def pg_url() -> str:
    """Base URL of the throwaway PostgreSQL that scripts/test.sh starts; skips when absent."""
    url = os.environ.get("ALIGHT_TEST_PG_URL")
    if not url:
        pytest.skip("ALIGHT_TEST_PG_URL is not set (scripts/test.sh starts PostgreSQL and sets it)")
    return url


@contextlib.contextmanager
def fresh_pg_schema(pg_url: str) -> Iterator[str]:
    """A URL onto a fresh, empty PostgreSQL schema, dropped when the block ends."""
    import sqlalchemy as sa

    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in pg_url else "?"
    try:
        yield f"{pg_url}{sep}options=-csearch_path%3D{schema}"
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


@pytest.fixture
def pg_store_url(pg_url: str) -> Iterator[str]:
    """A URL onto a fresh, empty PostgreSQL schema for this test (dropped afterwards)."""
    with fresh_pg_schema(pg_url) as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'alight.db'}"


@pytest.fixture
def store(sqlite_url: str) -> Iterator[SqlStore]:
    """A SqlStore on a temporary SQLite file."""
    s = SqlStore(sqlite_url)
    yield s
    s.close()


@pytest.fixture
def server_config(sqlite_url: str) -> ServerConfig:
    return ServerConfig(admin_key=ADMIN_KEY, db_url=sqlite_url, port=free_port())


@dataclass
class LiveServer:
    url: str
    admin_key: str
    app: FastAPI
    store: SqlStore
    config: ServerConfig

    def admin_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_key}"}


@pytest.fixture
def live_server(server_config: ServerConfig, store: SqlStore) -> Iterator[LiveServer]:
    """create_app on the `store` fixture, served on a free loopback port in a thread."""
    app = create_app(server_config, store=store)
    with ServerThread(app, port=server_config.port) as url:
        assert server_config.admin_key is not None
        yield LiveServer(url=url, admin_key=server_config.admin_key, app=app, store=store, config=server_config)


@pytest.fixture
def admin_client(live_server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_server.url, headers=live_server.admin_headers(), timeout=30) as client:
        yield client


# -- the harness matrix (README): tests marked `harness(...)` report their outcome per cell ----------------------
# The cells ride on each report's user_properties, which pytest-xdist sends from its workers to the process that
# writes the file (scripts/test.sh runs the suite on several workers).
_HARNESS_RESULTS: list[dict[str, object]] = []
_HARNESS_PROPERTY = "alight_harness_cells"


@pytest.hookimpl(tryfirst=True)
def pytest_itemcollected(item: pytest.Item) -> None:
    marks = list(item.iter_markers("harness"))
    if marks:
        item.user_properties.append((_HARNESS_PROPERTY, [dict(m.kwargs) for m in marks]))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if os.environ.get("ALIGHT_HARNESS_MATRIX") is None:
        return
    cells: list[dict[str, object]] | None = next(
        (value for name, value in report.user_properties if name == _HARNESS_PROPERTY),  # pyright: ignore[reportAssignmentType]
        None,
    )
    if not cells or (report.when != "call" and not (report.when == "setup" and not report.passed)):
        return
    outcome = "passed" if report.passed else ("skipped" if report.skipped else "failed")
    _HARNESS_RESULTS.extend({**cell, "test": report.nodeid, "outcome": outcome} for cell in cells)


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = os.environ.get("ALIGHT_HARNESS_MATRIX")
    if hasattr(session.config, "workerinput"):  # an xdist worker: its reports reach the controller, which writes
        return
    if target and _HARNESS_RESULTS:
        import json

        Path(target).write_text(json.dumps(_HARNESS_RESULTS, indent=1))
