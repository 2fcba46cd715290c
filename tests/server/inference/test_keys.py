"""Inference servers closed to agents: every route but /health needs a key, compared in constant time.

The embedded server (a real tiny engine on loopback), alight's key guard as vLLM loads it (with no
arguments, keys from the environment, around the vLLM double's dev routes), the standalone start that
generates its keys, and the embedded stack that hands the key to the gateway as a 0600 file.
"""

from __future__ import annotations

import http.client
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi import FastAPI
from inference_testkit import ADMIN_AUTH, ADMIN_KEY, API_KEY, AUTH, MODEL
from vllm_double import VllmDouble

from alight_server.inference.engine import InferenceEngine
from alight_server.inference.guard.alight_keyguard import ADMIN_KEY_ENV, API_KEY_ENV, KeyGuard
from alight_server.inference.server import create_inference_app
from alight_server.inference.vllm_server import GUARD_DIR, GUARD_MIDDLEWARE, VllmLaunch
from alight_server.stacks.kinds import KEY_DIR, UPSTREAM_ID, EmbeddedStack
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_testing.services import wait_ready

CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
WRONG = [
    {},
    {"Authorization": "Bearer wrong"},
    {"Authorization": f"Bearer {API_KEY}x"},
    {"Authorization": f"Bearer {API_KEY[:-1]}"},
    {"Authorization": f"Basic {API_KEY}"},
    {"Authorization": API_KEY},
    {"Authorization": "Bearer"},
    {"X-Api-Key": API_KEY},
]


def _status(url: str, method: str, path: str, headers: dict[str, str], body: object = None) -> int:
    return httpx.request(method, f"{url}{path}", json=body, headers=headers, timeout=60).status_code


@pytest.mark.parametrize("headers", WRONG, ids=lambda h: repr(h)[:40])
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/chat/completions", CHAT),
        ("POST", "/v1/completions", {**CHAT, "prompt": "hi"}),
        ("GET", "/v1/models", None),
        ("POST", "/admin/weights", {"path": "/nonexistent"}),
        ("GET", "/openapi.json", None),
        ("GET", "/docs", None),
    ],
)
def test_the_embedded_server_refuses_calls_without_its_key(
    server_url: str, method: str, path: str, body: object, headers: dict[str, str]
) -> None:
    response = httpx.request(method, f"{server_url}{path}", json=body, headers=headers, timeout=60)
    assert response.status_code == 401, response.text
    assert response.json()["error"]["type"] == "authentication_error" and API_KEY not in response.text


def test_the_api_key_opens_v1_and_only_v1(server_url: str) -> None:
    assert _status(server_url, "POST", "/v1/chat/completions", AUTH, CHAT) == 200
    assert _status(server_url, "GET", "/v1/models", AUTH) == 200
    assert _status(server_url, "POST", "/admin/weights", AUTH, {"path": "/nonexistent"}) == 401
    assert _status(server_url, "GET", "/openapi.json", AUTH) == 401


def test_the_admin_key_opens_every_route(server_url: str, engine: InferenceEngine) -> None:
    version = engine.version
    # Past the guard: the route itself refuses a checkpoint that does not exist, and nothing loads.
    assert _status(server_url, "POST", "/admin/weights", ADMIN_AUTH, {"path": "/nonexistent"}) == 400
    assert engine.version == version
    assert _status(server_url, "POST", "/v1/chat/completions", ADMIN_AUTH, CHAT) == 200


def test_without_an_admin_key_the_api_key_opens_v1_and_nothing_else(server_url: str, engine: InferenceEngine) -> None:
    """The embedded stack's server: the trainer updates the engine in-process, so no key opens /admin."""
    del server_url  # the shared engine is started by its own app, which outlives this one
    with ServerThread(create_inference_app(engine, api_key=API_KEY)) as url:
        assert _status(url, "GET", "/v1/models", AUTH) == 200
        assert _status(url, "POST", "/admin/weights", AUTH, {"path": "/nonexistent"}) == 401
        assert _status(url, "GET", "/openapi.json", AUTH) == 401


def test_health_answers_without_a_key(server_url: str) -> None:
    assert _status(server_url, "GET", "/health", {}) == 200 and _status(server_url, "GET", "/healthz", {}) == 200


@pytest.mark.parametrize("path", ["/v1/../admin/weights", "/v1/./../openapi.json", "/v1/%2e%2e/admin/weights"])
def test_the_api_key_does_not_open_a_path_that_dot_segments_lead_out_of_v1(server_url: str, path: str) -> None:
    """Sent as written (http.client does not normalise paths the way httpx does)."""
    parts = urlsplit(server_url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        conn.request(
            "POST", path, body=b'{"path": "/nonexistent"}', headers={**AUTH, "Content-Type": "application/json"}
        )
        assert conn.getresponse().status == 401
    finally:
        conn.close()


def test_two_authorization_headers_are_refused_even_when_one_is_right(server_url: str) -> None:
    parts = urlsplit(server_url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        conn.putrequest("GET", "/v1/models")
        conn.putheader("Authorization", f"Bearer {API_KEY}")
        conn.putheader("Authorization", "Bearer other")
        conn.endheaders()
        assert conn.getresponse().status == 401
    finally:
        conn.close()


def test_an_inference_app_cannot_be_built_without_a_key(engine: InferenceEngine) -> None:
    with pytest.raises(ValueError, match="needs a non-empty api_key"):
        create_inference_app(engine, api_key="")


# -- the guard as vLLM loads it ----------------------------------------------------------------------------------


@pytest.fixture
def guarded_double(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, VllmDouble]]:
    """The vLLM double's routes behind KeyGuard added the way vLLM's --middleware adds it: no arguments."""
    monkeypatch.setenv(API_KEY_ENV, API_KEY)
    monkeypatch.setenv(ADMIN_KEY_ENV, ADMIN_KEY)
    double = VllmDouble()
    app = double.app()
    app.add_middleware(KeyGuard)
    with ServerThread(app) as url:
        yield url, double


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": "/tmp"}}),
        ("POST", "/pause", None),
        ("POST", "/resume", None),
        ("POST", "/reset_prefix_cache", None),
        ("POST", "/update_weight_version", {"new_version": "9"}),
        ("GET", "/weight_info", None),
    ],
)
def test_vllms_dev_routes_are_refused_without_the_admin_key_even_with_the_gateways(
    guarded_double: tuple[str, VllmDouble], method: str, path: str, body: object
) -> None:
    url, double = guarded_double
    for headers in [*WRONG, AUTH]:
        assert _status(url, method, path, headers, body) == 401, headers
    assert double.calls == []  # nothing reached a route
    assert _status(url, method, path, ADMIN_AUTH, body) == 200


@pytest.mark.parametrize("path", ["/v1/load_lora_adapter", "/v1/unload_lora_adapter"])
def test_vllms_lora_routes_under_v1_need_the_admin_key_not_the_gateways(
    guarded_double: tuple[str, VllmDouble], path: str, tmp_path: Path
) -> None:
    """A leaked gateway key must not swap the policy's adapter: these routes change weights, /v1 or not."""
    url, double = guarded_double
    body = {"lora_name": "x", "lora_path": "/tmp/planted-adapter"}
    for headers in [*WRONG, AUTH]:
        assert _status(url, "POST", path, headers, body) == 401, headers
    assert double.calls == []
    assert _status(url, "POST", "/v1/load_lora_adapter", ADMIN_AUTH, {**body, "lora_path": str(tmp_path)}) == 200


def test_vllms_health_stays_open_behind_the_guard(guarded_double: tuple[str, VllmDouble]) -> None:
    url, _ = guarded_double
    assert _status(url, "GET", "/health", {}) == 200
    assert _status(url, "GET", "/health/", {}) in (307, 401, 404)  # only the exact path is open
    assert _status(url, "GET", "/metrics", {}) == 401


def test_the_guard_refuses_to_start_without_a_key_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    monkeypatch.setenv(ADMIN_KEY_ENV, ADMIN_KEY)
    with pytest.raises(RuntimeError, match=f"needs an API key: set {API_KEY_ENV}"):
        KeyGuard(FastAPI())


def test_the_guard_module_imports_with_the_standard_library_alone() -> None:
    """vLLM's interpreter has no alight, FastAPI of its own version: the guard must need nothing but Python."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import alight_keyguard; "
        "print(sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names) - {'alight_keyguard', '__main__'}))"
    )
    out = subprocess.run([sys.executable, "-S", "-c", code, str(GUARD_DIR)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_vllm_starts_behind_the_guard_with_its_keys_in_the_environment_not_the_command_line(tmp_path: Path) -> None:
    launch = VllmLaunch(model_dir=tmp_path, served_name="m", port=8000)
    command, env = launch.command(), launch.env({"PYTHONPATH": "/elsewhere", "VLLM_API_KEY": "operators"})
    assert command[command.index("--middleware") + 1] == GUARD_MIDDLEWARE
    assert env["PYTHONPATH"].split(os.pathsep) == [str(GUARD_DIR), "/elsewhere"]
    assert env[API_KEY_ENV] == launch.api_key and env[ADMIN_KEY_ENV] == launch.admin_key
    assert "VLLM_API_KEY" not in env  # vLLM's own /v1 check would refuse the admin key on /v1/load_lora_adapter
    assert launch.api_key != launch.admin_key and len(launch.api_key) >= 32
    assert not {launch.api_key, launch.admin_key} & set(command) and launch.api_key not in repr(launch)
    assert VllmLaunch(model_dir=tmp_path, served_name="m", port=8000).api_key != launch.api_key  # new per launch


# -- standalone and embedded starts ------------------------------------------------------------------------------


def test_a_standalone_start_without_keys_generates_them_and_says_where(tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "inference.log"
    argv = [sys.executable, "-m", "alight_server.inference", "--model", MODEL, "--device", "cpu", "--port", str(port),
            "--key-dir", str(tmp_path / "keys"), "--threads", "1"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALIGHT_INFERENCE_")}
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(f"{url}/health", proc, log)
        api_file, admin_file = tmp_path / "keys" / "api.key", tmp_path / "keys" / "admin.key"
        assert log.read_text().splitlines()[:2] == [f"api key (for /v1) (generated): {api_file}",
                                                    f"admin key (for /admin) (generated): {admin_file}"]  # fmt: skip
        for file in (api_file, admin_file):
            assert stat.S_IMODE(file.stat().st_mode) == 0o600
        api = {"Authorization": f"Bearer {api_file.read_text().strip()}"}
        admin = {"Authorization": f"Bearer {admin_file.read_text().strip()}"}
        assert _status(url, "GET", "/v1/models", {}) == 401
        assert _status(url, "GET", "/v1/models", api) == 200
        assert _status(url, "POST", "/admin/weights", api, {"path": "/nonexistent"}) == 401
        assert _status(url, "POST", "/admin/weights", admin, {"path": "/nonexistent"}) == 400
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_the_embedded_stack_hands_the_gateway_its_key_as_a_private_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # output_dir is often relative: the registration still names an absolute file
    engine = InferenceEngine.from_model_name(MODEL, device="cpu")
    with EmbeddedStack(engine, Path("run"), concurrency=1) as stack:
        assert stack.client is not None
        (upstream,) = stack.client.list_upstreams()
        key_file = Path(upstream.api_key_file or "")
        assert key_file.parent == (tmp_path / "run" / KEY_DIR).resolve()
        assert upstream.id == UPSTREAM_ID and not upstream.api_key_encrypted
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        inference = upstream.url.removesuffix("/v1")
        assert _status(inference, "GET", "/v1/models", {}) == 401
        assert _status(inference, "GET", "/v1/models", {"Authorization": f"Bearer {key_file.read_text()}"}) == 200
