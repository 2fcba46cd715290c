"""`inference.backend: vllm` around the server: config keys, the launch a run builds, external vLLM checks, CLI errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import torch

from alight_server.inference.vllm_weights import VllmWeightError, VllmWeights
from alight_server.stacks.kinds import ExternalStack
from alight_server.stacks.opening import vllm_policy
from alight_server.stacks.server_thread import ServerThread
from alight_server.trainer.config.run import ConfigError, parse_config
from alight_server.trainer.config.sections import ServerSettings
from tests.conftest import LiveServer
from tests.server.inference.vllm_double import VllmDouble
from tests.server.train_cli import alight_train

BASE = {"model": "tiny", "dataset": {"train": "t.jsonl"}, "agent": {"entrypoint": "a.py:main"}}


def test_the_embedded_engine_stays_the_default_backend(tmp_path: Path) -> None:
    assert parse_config(BASE, tmp_path).inference.backend == "embedded"


def test_an_unknown_backend_is_a_config_error_naming_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"inference\.backend: Input should be 'embedded' or 'vllm'"):
        parse_config({**BASE, "inference": {"backend": "sglang"}}, tmp_path)


def test_a_run_with_lora_launches_vllm_for_one_adapter_of_its_rank(tmp_path: Path) -> None:
    raw = {**BASE, "lora": {"enabled": True, "r": 8}, "inference": {"backend": "vllm", "vllm": {"port": 8123}}}
    policy = vllm_policy(parse_config(raw, tmp_path), tmp_path / "run", adapter=object())
    launch = policy.server.launch
    assert (launch.model_dir / "config.json").is_file() and launch.served_name == "tiny" and launch.port == 8123
    assert launch.lora_rank == 8 and policy.model == "tiny-lora"
    assert policy.server.log_path == tmp_path / "run" / "logs" / "vllm.log"


def test_a_run_without_lora_serves_the_base_model_under_its_name(tmp_path: Path) -> None:
    policy = vllm_policy(parse_config({**BASE, "inference": {"backend": "vllm"}}, tmp_path), tmp_path)
    assert policy.server.launch.lora_rank is None and policy.model == "tiny"


@pytest.fixture
def vllm_url(double: VllmDouble, live_server: LiveServer) -> Iterator[str]:
    with ServerThread(double.app()) as url:
        body = {"id": "vllm", "url": f"{url}/v1", "model": "tiny"}
        httpx.post(
            f"{live_server.url}/api/upstreams", json=body, headers=live_server.admin_headers()
        ).raise_for_status()
        yield url


def external(live_server: LiveServer, url: str, tmp_path: Path) -> ExternalStack:
    settings = ServerSettings(url=live_server.url, inference_url=url, admin_key=live_server.admin_key)
    return ExternalStack(settings, "tiny", tmp_path, vllm=True).start()


def test_an_external_vllm_gets_weights_in_place_and_a_second_run_notices_them(
    live_server: LiveServer, vllm_url: str, double: VllmDouble, tmp_path: Path
) -> None:
    stack = external(live_server, vllm_url, tmp_path)
    assert not stack.serves_other_weights  # vLLM's weight version is still "default"
    sync = stack.weight_sync()
    assert isinstance(sync.target, VllmWeights)
    assert sync.push({"lm_head.weight": torch.ones(2, 2)})[0] == 1 and double.weight_version == "1"
    stack.close()
    assert external(live_server, vllm_url, tmp_path).serves_other_weights


def test_an_external_vllm_without_dev_mode_is_refused_at_the_start(live_server: LiveServer, tmp_path: Path) -> None:
    with ServerThread(VllmDouble(dev_mode=False).app()) as url:
        body = {"id": "vllm", "url": f"{url}/v1", "model": "tiny"}
        httpx.post(
            f"{live_server.url}/api/upstreams", json=body, headers=live_server.admin_headers()
        ).raise_for_status()
        with pytest.raises(VllmWeightError, match="start it with VLLM_SERVER_DEV_MODE=1"):
            external(live_server, url, tmp_path)


def test_alight_train_without_the_vllm_environment_says_how_to_build_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-venv" / "bin" / "python"
    settings = f"inference: {{device: cpu, backend: vllm, vllm: {{python: '{missing}'}}}}\noutput_dir: run\n"
    result = alight_train(tmp_path, settings)
    assert result.exit_code == 1, result.output
    sentence = f"alight train: no vLLM interpreter at {missing}: build it with `ALIGHT_VLLM=1 bash scripts/setup.sh`"
    assert sentence in " ".join(result.output.split())
