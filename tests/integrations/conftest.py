"""Fixtures for integration tests: in-memory spans against the fake upstream, and agent processes against the full stack."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor, HTTPXClientInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from alight import envvars
from alight.schemas import AttemptFinish, AttemptStart, RolloutCreate, ToolSpan, Trajectory, UpstreamCreate
from alight_server.config import ServerConfig
from alight_server.http.auth import derive_token_secret, issue_attempt_token
from alight_server.stacks.server_thread import ServerThread
from alight_testing.fake_upstream import create_fake_upstream

_EXPORTER = InMemorySpanExporter()


def _install_exporter() -> None:
    """Send every span to _EXPORTER, whether or not an earlier test already installed a global provider."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider())  # once per process; a no-op if someone won the race
        provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider) and not getattr(provider, "_integration_tests_export", False):
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        provider._integration_tests_export = True  # type: ignore[attr-defined]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Spans finished during the test, in end order; model calls carry traceparent while it runs."""
    _install_exporter()
    _EXPORTER.clear()
    # traceparent on model calls: the openai client uses httpx2, others httpx. Switched off again afterwards
    # (only if this fixture switched it on), so later tests see httpx as they expect.
    switched_on = []
    for instrumentor in (HTTPXClientInstrumentor(), HTTPX2ClientInstrumentor()):
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument()
            switched_on.append(instrumentor)
    yield _EXPORTER
    for instrumentor in switched_on:
        instrumentor.uninstrument()
    _EXPORTER.clear()


@pytest.fixture(scope="session")
def fake_upstream() -> Iterator[tuple[str, Any]]:
    """(base URL ending in /v1, the upstream's state with its call log) for the model named 'fake'."""
    app = create_fake_upstream("fake")
    with ServerThread(app) as url:
        yield f"{url}/v1", app.state.fake


class SpanTree:
    """Finished spans with the lookups tests need: by name prefix, parent, ancestors."""

    def __init__(self, finished: tuple[ReadableSpan, ...] | list[ReadableSpan]) -> None:
        self.spans = list(finished)

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name.startswith(prefix)]

    def by_id(self, span_id: int) -> ReadableSpan | None:
        return next((s for s in self.spans if s.context.span_id == span_id), None)

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        return self.by_id(span.parent.span_id) if span.parent else None

    def ancestors(self, span: ReadableSpan) -> list[str]:
        """Names of the span's ancestors, nearest first."""
        names, current = [], self.parent(span)
        while current is not None:
            names.append(current.name)
            current = self.parent(current)
        return names


@pytest.fixture
def instrumented(request: pytest.FixtureRequest) -> Iterator[None]:
    """The test module's `INTEGRATION` instrumented for the test and uninstrumented after it (reversible)."""
    integration = request.module.INTEGRATION
    integration.instrument()
    yield
    integration.uninstrument()


@pytest.fixture
def tree(spans: InMemorySpanExporter) -> Any:
    """Call it after the run: `tree()` is a SpanTree of what finished so far."""
    return lambda: SpanTree(spans.get_finished_spans())


def caller_span_ids(upstream_state: Any) -> list[int]:
    """The span id in each logged call's traceparent header (the span that made the HTTP request)."""
    ids = []
    for call in upstream_state.calls:
        header = call.headers.get("traceparent", "")
        ids.append(int(header.split("-")[2], 16) if header.count("-") == 3 else 0)
    return ids


@pytest.fixture
def callers() -> Any:
    return caller_span_ids


# --- end to end: a real agent process under the controller's environment, against server + gateway + fake upstream


REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class AgentRun:
    rollout_id: str
    attempt: int
    returncode: int
    output: str  # stdout + stderr, for failure messages


@dataclass
class AlightStack:
    """A live server with a policy upstream (the fake or the tiny model); `run_agent` runs one attempt of an agent."""

    server: Any  # tests/conftest.py LiveServer
    upstream: Any  # the fake upstream's state (call log); None on the tiny model

    def run_agent(self, target: str, task: Any, timeout_s: float = 120.0, cwd: Path = REPO_ROOT) -> AgentRun:
        store = self.server.store
        rollout_id = f"it-{uuid.uuid4().hex[:10]}"
        store.create_rollouts([RolloutCreate(id=rollout_id, task=task)])
        [(rollout, attempt)] = store.claim_attempts(1, ids=[rollout_id])
        token = issue_attempt_token(derive_token_secret(self.server.admin_key), rollout_id, attempt, ttl_s=600)
        start = AttemptStart(
            rollout=rollout,
            attempt=attempt,
            token=token,
            gateway_base_url=envvars.gateway_url(self.server.url, rollout_id, attempt),
            otlp_traces_endpoint=envvars.otlp_traces_url(self.server.url),
        )
        env = {k: v for k, v in os.environ.items() if k not in envvars.ALL}
        env.update(envvars.attempt_env(start, self.server.url))
        proc = subprocess.run(
            [sys.executable, "-m", "alight.entry", target],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        status = "succeeded" if proc.returncode == 0 else "failed"
        store.finish_attempt(rollout_id, attempt, AttemptFinish(status=status, exit_code=proc.returncode))
        return AgentRun(rollout_id, attempt, proc.returncode, proc.stdout + proc.stderr)

    def trajectory(self, run: AgentRun) -> Trajectory:
        response = httpx.get(
            f"{self.server.url}/api/rollouts/{run.rollout_id}/trajectory",
            params={"attempt": run.attempt, "reveal": "true"},  # the exact copy the trainer reads
            headers=self.server.admin_headers(),
            timeout=30,
        )
        assert response.status_code == 200, response.text
        return Trajectory.model_validate(response.json())

    def trainable_trajectory(self, target: str, task: Any, calls: int) -> Trajectory:
        """Run `target` on `task` to success; its trajectory, checked to hold `calls` trainable model calls."""
        run = self.run_agent(target, task)
        assert run.returncode == 0, run.output
        trajectory = self.trajectory(run)
        self.assert_calls_trainable(trajectory, calls)
        return trajectory

    @staticmethod
    def assert_calls_trainable(trajectory: Trajectory, count: int) -> None:
        """`count` model calls, each answered, with the token ids and logprobs the trainer needs."""
        assert len(trajectory.calls) == count, [tc.call.seq for tc in trajectory.calls]
        for tc in trajectory.calls:
            call = tc.call
            assert call.status_code == 200, call.error
            assert call.prompt_token_ids and call.response_token_ids, f"call {call.seq} has no token ids"
            assert len(call.response_logprobs) == len(call.response_token_ids)
            assert call.span_id, f"call {call.seq} has no caller span (traceparent missing)"

    @staticmethod
    def tool_spans_named(trajectory: Trajectory, name: str) -> list[ToolSpan]:
        return [s for s in trajectory.tool_spans if s.name == name]


POLICY_MODEL = "fake-policy"


@pytest.fixture(scope="module")
def tiny_upstream() -> Iterator[tuple[str, str, str]]:
    """(base URL ending in /v1, model name, its key) of alight's own inference server on the tiny model, in a thread."""
    import torch

    from alight_server.inference.engine import InferenceEngine
    from alight_server.inference.server import create_inference_app

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as `inference.torch_threads: 1`: two threads waiting on each other crawl on 2 cores
    key = secrets.token_urlsafe(32)
    try:
        with (
            InferenceEngine.from_model_name("tiny", device="cpu", max_batch_size=8) as engine,
            ServerThread(create_inference_app(engine, api_key=key)) as url,
        ):
            yield f"{url}/v1", engine.model_name, key
    finally:
        torch.set_num_threads(threads)


@pytest.fixture
def server_config(server_config: ServerConfig, tmp_path: Path) -> ServerConfig:
    """tests/conftest.py's, reading upstream key files from tmp_path/upstream-keys (as the embedded stack does)."""
    return server_config.model_copy(update={"upstream_key_dir": tmp_path / "upstream-keys"})


@pytest.fixture
def tiny_stack(live_server: Any, tiny_upstream: tuple[str, str, str], tmp_path: Path) -> AlightStack:
    """The server from tests/conftest.py with the tiny model (real token ids, random replies) as the policy."""
    url, model, key = tiny_upstream
    key_file = tmp_path / "upstream-keys" / "policy.key"
    key_file.parent.mkdir()
    key_file.write_text(key)
    live_server.store.add_upstream(UpstreamCreate(id="policy", url=url, model=model, api_key_file=str(key_file)))
    return AlightStack(live_server, None)


@pytest.fixture
def alight_stack(live_server: Any) -> Iterator[AlightStack]:
    """The server from tests/conftest.py with a fake vLLM-shaped upstream registered as the policy."""
    app = create_fake_upstream(POLICY_MODEL)
    with ServerThread(app) as url:
        live_server.store.add_upstream(UpstreamCreate(id="policy", url=f"{url}/v1", model=POLICY_MODEL))
        yield AlightStack(live_server, app.state.fake)
