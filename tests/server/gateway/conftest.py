"""Gateway fixtures: an inference upstream, a live server wired to it, and attempts to call it as.

`upstream` is parametrized: every gateway test runs against each backend in
UPSTREAM_KINDS. The fake is vLLM-shaped and exposes its call log, so tests can
compare what the agent saw with what the upstream produced; backends without
a log (`upstream.log is None`) get the checks that need no log.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from alight.schemas import Mode, RolloutCreate, UpstreamCreate
from alight_server.config import ServerConfig
from alight_server.http.auth import issue_attempt_token
from alight_server.stacks.kinds import KEY_DIR
from alight_server.stacks.server_thread import ServerThread
from alight_testing import FakeUpstreamState, Faults, create_fake_upstream

# Add a kind here (and a branch in `upstream_server`) to run the gateway suite on another backend.
# A real vLLM joins when ALIGHT_TEST_VLLM_URL names one (see docs/gateway.md).
VLLM_URL = os.environ.get("ALIGHT_TEST_VLLM_URL")
# alight's embedded backend (tiny model) runs the real-client cases too (issue: "once more with
# this backend as upstream"); ALIGHT_TEST_GATEWAY_EMBEDDED=0 leaves it out for quick local runs.
EMBEDDED = os.environ.get("ALIGHT_TEST_GATEWAY_EMBEDDED", "1") != "0"
UPSTREAM_KINDS = [
    "fake",
    *(["embedded"] if EMBEDDED else []),
    *([pytest.param("vllm", marks=pytest.mark.vllm)] if VLLM_URL else []),
]


@dataclass
class UpstreamUnderTest:
    kind: str
    url: str  # OpenAI-compatible base URL, ending in /v1
    model: str
    log: FakeUpstreamState | None  # the fake's call log and fault plan; None for real backends
    api_key: str | None = None  # what its /v1 opens with: the gateway is handed it as a key file


@pytest.fixture(scope="session", params=UPSTREAM_KINDS)
def upstream_server(request: pytest.FixtureRequest) -> Iterator[UpstreamUnderTest]:
    """One server per backend kind for the whole session (starting one is the slow part)."""
    if request.param == "fake":
        app = create_fake_upstream(model="fake-policy")
        with ServerThread(app) as url:
            yield UpstreamUnderTest("fake", url + "/v1", "fake-policy", app.state.fake)
    elif request.param == "embedded":
        # alight's own backend on the tiny model: real token ids from a real (random) transformer.
        from alight_server.inference.engine import InferenceEngine
        from alight_server.inference.server import create_inference_app

        key = secrets.token_urlsafe(32)
        with (
            InferenceEngine.from_model_name("tiny", device="cpu", max_batch_size=8) as engine,
            ServerThread(create_inference_app(engine, api_key=key)) as url,
        ):
            yield UpstreamUnderTest("embedded", url + "/v1", engine.model_name, None, key)
    elif request.param == "vllm":
        assert VLLM_URL is not None
        url = VLLM_URL.rstrip("/")
        model = httpx.get(f"{url}/models", timeout=10).json()["data"][0]["id"]
        yield UpstreamUnderTest("vllm", url, model, None)
    else:  # pragma: no cover - a kind listed without a branch
        raise ValueError(f"no upstream fixture for kind {request.param!r}")


@pytest.fixture
def upstream(upstream_server: UpstreamUnderTest) -> UpstreamUnderTest:
    """The session's upstream with a clean call log and no faults."""
    if upstream_server.log is not None:
        upstream_server.log.calls.clear()
        upstream_server.log.faults = Faults()
    return upstream_server


@pytest.fixture(autouse=True)
def _skip_fake_only_tests_early(request: pytest.FixtureRequest) -> None:
    """Skip tests that need the fake's log on other backends before a server is started for them."""
    if "fake" in request.fixturenames and request.getfixturevalue("upstream_server").log is None:
        pytest.skip("needs the fake upstream's call log and faults")


@pytest.fixture
def fake(upstream: UpstreamUnderTest) -> FakeUpstreamState:
    """The fake upstream's state; tests that need its log or faults skip on other backends."""
    if upstream.log is None:
        pytest.skip(f"needs the fake upstream's call log; {upstream.kind} has none")
    return upstream.log


@dataclass
class AttemptUnderTest:
    rollout_id: str
    attempt: int
    token: str
    server_url: str

    @property
    def base_url(self) -> str:
        """What OPENAI_BASE_URL is set to for this attempt."""
        return f"{self.server_url}/gw/{self.rollout_id}/{self.attempt}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """Anthropic clients append /v1/messages themselves."""
        return f"{self.server_url}/gw/{self.rollout_id}/{self.attempt}"


@dataclass
class GatewayUnderTest:
    server: Any  # tests/conftest.py LiveServer: .url, .store, .app, .admin_key
    upstream: UpstreamUnderTest
    key_file: str | None = None  # the upstream's key, where the server reads it from

    def registration(self, upstream_id: str) -> dict[str, Any]:
        """The JSON that registers the upstream under test again, as `upstream_id`."""
        body = {"id": upstream_id, "url": self.upstream.url, "model": self.upstream.model}
        return {**body, "api_key_file": self.key_file} if self.key_file else body

    @property
    def url(self) -> str:
        return self.server.url

    def start_attempts(self, n: int = 1, mode: Mode = Mode.TRAIN) -> list[AttemptUnderTest]:
        """Create n rollouts and claim their first attempts straight through the store."""
        store = self.server.store
        rollouts = store.create_rollouts([RolloutCreate(task={"i": i}, mode=mode) for i in range(n)])
        claimed = store.claim_attempts(limit=n, ids=[r.id for r in rollouts])
        secret = self.server.app.state.token_secret
        return [
            AttemptUnderTest(r.id, a, issue_attempt_token(secret, r.id, a, ttl_s=3600), self.server.url)
            for r, a in claimed
        ]

    def start_attempt(self, mode: Mode = Mode.TRAIN) -> AttemptUnderTest:
        return self.start_attempts(1, mode)[0]


@pytest.fixture
def server_config(server_config: ServerConfig, tmp_path: Path) -> ServerConfig:
    """tests/conftest.py's, reading upstream key files from tmp_path/upstream-keys (as the embedded stack does)."""
    return server_config.model_copy(update={"upstream_key_dir": tmp_path / KEY_DIR})


@pytest.fixture
def gateway(live_server: Any, upstream: UpstreamUnderTest, tmp_path: Path) -> GatewayUnderTest:
    key_file = None
    if upstream.api_key is not None:
        (tmp_path / KEY_DIR).mkdir(exist_ok=True)
        key_file = tmp_path / KEY_DIR / "u1.key"
        key_file.write_text(upstream.api_key)
    under_test = GatewayUnderTest(live_server, upstream, str(key_file) if key_file else None)
    live_server.store.add_upstream(UpstreamCreate.model_validate(under_test.registration("u1")))
    return under_test


@pytest.fixture
def attempt(gateway: GatewayUnderTest) -> AttemptUnderTest:
    return gateway.start_attempt()
