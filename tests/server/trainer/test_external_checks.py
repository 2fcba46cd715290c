"""External-server mode fails early and says what to fix: config, server, admin key, upstream, inference key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from alight.client import AlightClient
from alight.schemas import RolloutCreate, RolloutState
from alight_server.inference.engine import InferenceEngine
from alight_server.inference.models import load_policy
from alight_server.inference.server import create_inference_app
from alight_server.stacks.kinds import ExternalStack
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.trainer.config.run import ConfigError, parse_config
from alight_server.trainer.config.sections import ServerSettings
from alight_server.trainer.run.rollouts import wait_all
from tests.server.train_cli import alight_train

INFERENCE_KEY = "inference-key"
BASE = {"model": "tiny", "dataset": {"train": "t.jsonl"}, "agent": {"entrypoint": "a.py:main"}}


@pytest.fixture(scope="module")
def inference() -> Iterator[str]:
    engine = InferenceEngine.from_model_name("tiny", device="cpu", model_name="tiny")
    with ServerThread(create_inference_app(engine, api_key="inference-api-key", admin_key=INFERENCE_KEY)) as url:
        yield url
    engine.stop()


def settings(server: str, inference: str, **extra: Any) -> ServerSettings:
    return ServerSettings.model_validate({"url": server, "inference_url": inference, **extra})


def start(settings: ServerSettings, tmp_path: Path) -> ExternalStack:
    return ExternalStack(settings, "tiny", tmp_path).start()


@pytest.mark.parametrize(
    ("server", "message"),
    [
        ({"url": "http://127.0.0.1:8700"}, r"server\.url is set but server\.inference_url is not"),
        ({"inference_url": "http://127.0.0.1:8001"}, r"server\.inference_url is only used with server\.url"),
        ({"url": "127.0.0.1:8700", "inference_url": "http://x"}, r"server\.url: .*http:// or https:// URL"),
        ({"url": "http://h", "inference_url": "http://i", "admin_kee": "k"}, r"server\.admin_kee: unknown key"),
    ],
)
def test_bad_server_settings_are_config_errors(tmp_path: Path, server: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({**BASE, "server": server}, tmp_path)


def test_the_inference_url_may_be_given_as_its_openai_base_url() -> None:
    assert settings("http://s:8700/", "http://i:8001/v1/").inference_url == "http://i:8001"
    assert settings("http://s:8700/", "http://i:8001").url == "http://s:8700"


def test_no_admin_key_anywhere_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ALIGHT_ADMIN_KEY", raising=False)
    with pytest.raises(RuntimeError, match=r"no admin key: set server\.admin_key or ALIGHT_ADMIN_KEY"):
        start(settings("http://127.0.0.1:1", "http://127.0.0.1:2"), tmp_path)


def test_a_server_that_does_not_answer_is_named(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(RuntimeError, match=rf"no alight server answers at {url}/readyz"):
        start(settings(url, "http://127.0.0.1:2", admin_key="k"), tmp_path)


def test_a_wrong_admin_key_is_refused(live_server: Any, inference: str, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="refused the admin key"):
        start(settings(live_server.url, inference, admin_key="wrong"), tmp_path)


def test_a_server_without_an_upstream_is_refused(live_server: Any, inference: str, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"has no upstream.*POST /api/upstreams"):
        start(settings(live_server.url, inference, admin_key=live_server.admin_key), tmp_path)


def register(live_server: Any, inference: str) -> None:
    body = {"id": "policy", "url": f"{inference}/v1", "model": "tiny"}
    httpx.post(f"{live_server.url}/api/upstreams", json=body, headers=live_server.admin_headers()).raise_for_status()


def test_the_inference_key_is_checked_and_an_earlier_runs_weights_are_noticed(
    live_server: Any, inference: str, tmp_path: Path
) -> None:
    register(live_server, inference)
    with pytest.raises(RuntimeError, match=r"refused the key for /admin/weights: set server\.inference_admin_key"):
        start(settings(live_server.url, inference, admin_key=live_server.admin_key), tmp_path)
    keys = {"admin_key": live_server.admin_key, "inference_admin_key": INFERENCE_KEY}
    stack = start(settings(live_server.url, inference, **keys), tmp_path)
    assert not stack.serves_other_weights  # a fresh inference server: nothing to replace at the start
    # once it holds other weights (an earlier run's), the trainer must replace them before its first rollout
    stack.weight_sync().push(first_layer_weights())
    stack.close()
    assert start(settings(live_server.url, inference, **keys), tmp_path).serves_other_weights


def first_layer_weights() -> dict[str, torch.Tensor]:
    model, _ = load_policy("tiny", device="cpu")
    name, tensor = next(iter(model.state_dict().items()))
    return {name: tensor + 0.01}


def test_a_config_evaluator_the_server_does_not_run_is_refused_with_the_fix(
    live_server: Any, inference: str, tmp_path: Path
) -> None:
    register(live_server, inference)
    keys = {"admin_key": live_server.admin_key, "inference_admin_key": INFERENCE_KEY}
    stack = ExternalStack(settings(live_server.url, inference, **keys), "tiny", tmp_path, evaluator="scoring.py:score")
    with pytest.raises(RuntimeError, match=r"runs none.*alight serve --config.*evaluator:"):
        stack.start()


def test_alight_train_prints_the_problem_and_exits_1(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = alight_train(tmp_path, f"server: {{url: '{url}', inference_url: 'http://127.0.0.1:9', admin_key: k}}\n")
    assert result.exit_code == 1, result.output
    assert f"alight train: no alight server answers at {url}/readyz" in result.output


def test_waiting_on_rollouts_no_controller_claims_says_so(live_server: Any) -> None:
    client = AlightClient(live_server.url, live_server.admin_key)
    (rollout,) = client.create_rollouts([RolloutCreate(id="unclaimed", task={})])
    hints: list[float] = []

    def unclaimed(seconds: float) -> None:
        hints.append(seconds)
        client.cancel_rollout(rollout.id)  # ends the wait, as a user's Ctrl-C would

    (done,) = wait_all(client, [rollout.id], poll_s=0.2, on_unclaimed=unclaimed, unclaimed_after_s=0.5)
    assert done.state == RolloutState.CANCELLED
    assert len(hints) == 1 and hints[0] >= 0.5
    client.close()
