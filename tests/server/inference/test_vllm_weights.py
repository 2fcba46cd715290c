"""The in-place weight-update protocol against a loopback double of vLLM's HTTP routes, through the real gateway."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from alight.client import AlightClient
from alight_server.inference.vllm_weights import VllmWeightError, VllmWeights
from alight_server.stacks.server_thread import ServerThread
from alight_server.trainer.run.weight_sync import WeightSync
from tests.conftest import LiveServer
from tests.server.inference.vllm_double import VllmDouble

FULL = ["/pause?mode=wait", "/collective_rpc:reload_weights", "/reset_prefix_cache", "/update_weight_version",
        "/resume"]  # fmt: skip


@pytest.fixture
def client(live_server: LiveServer) -> Iterator[AlightClient]:
    with AlightClient(live_server.url, live_server.admin_key) as c:
        yield c


def weights() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return {"model.embed_tokens.weight": torch.randn(8, 4), "lm_head.weight": torch.randn(8, 4)}


class LoraModel:
    """Writes the two files peft's save_pretrained writes for an adapter."""

    def save_pretrained(self, folder: str) -> None:
        from safetensors.torch import save_file

        (Path(folder) / "adapter_config.json").write_text('{"r": 8, "peft_type": "LORA"}')
        save_file({"base_model.model.q_proj.lora_A.weight": torch.zeros(8, 4)}, f"{folder}/adapter_model.safetensors")


def test_full_weights_reach_vllm_inside_pause_and_resume_with_the_gateways_new_version(
    client: AlightClient, double: VllmDouble, vllm_url: str, tmp_path: Path
) -> None:
    sync = WeightSync(client, target=VllmWeights(vllm_url, tmp_path))
    version, _ = sync.push(weights(), {"step": 1})
    assert double.calls == FULL
    assert version == 1 and double.weight_version == "1" and client.gateway_status()["policy_version"] == 1
    assert set(double.loaded) == set(weights()) and torch.equal(
        double.loaded["lm_head.weight"], weights()["lm_head.weight"]
    )
    assert not double.paused


def test_a_second_push_advances_vllms_weight_version_again(
    client: AlightClient, double: VllmDouble, vllm_url: str, tmp_path: Path
) -> None:
    sync = WeightSync(client, target=VllmWeights(vllm_url, tmp_path))
    sync.push(weights())
    assert sync.push(weights())[0] == 2 and double.weight_version == "2"


def test_a_lora_adapter_is_pushed_in_place_without_asking_for_full_weights(
    client: AlightClient, double: VllmDouble, vllm_url: str, tmp_path: Path
) -> None:
    target = VllmWeights(vllm_url, tmp_path, adapter=LoraModel(), adapter_name="tiny-lora")
    target.load_initial_adapter()

    def full_weights() -> dict[str, torch.Tensor]:
        raise AssertionError("the full weights were asked for")

    WeightSync(client, target=target).push(full_weights)
    assert double.calls == ["/v1/load_lora_adapter:inplace=False", "/pause?mode=wait",
                            "/v1/load_lora_adapter:inplace=True", "/reset_prefix_cache", "/update_weight_version",
                            "/resume"]  # fmt: skip
    assert double.adapter_files == ["adapter_config.json", "adapter_model.safetensors"] and not double.loaded


def test_a_failed_reload_resumes_vllm_and_the_gateway_without_a_new_version(
    client: AlightClient, double: VllmDouble, vllm_url: str, tmp_path: Path
) -> None:
    double.fail["/collective_rpc:reload_weights"] = 500
    sync = WeightSync(client, target=VllmWeights(vllm_url, tmp_path))
    with pytest.raises(VllmWeightError, match=r"could not reload the weights: vLLM answered /collective_rpc with 500"):
        sync.push(weights())
    assert double.calls[-1] == "/resume" and not double.paused and double.weight_version == "default"
    status = client.gateway_status()
    assert status["policy_version"] == 0 and not status["paused"]


def test_a_vllm_without_dev_mode_is_told_to_start_with_it(client: AlightClient, tmp_path: Path) -> None:
    no_dev_mode = r"no /weight_info route: start it with VLLM_SERVER_DEV_MODE=1"
    with ServerThread(VllmDouble(dev_mode=False).app()) as url, pytest.raises(VllmWeightError, match=no_dev_mode):
        VllmWeights(url, tmp_path).weight_version()
