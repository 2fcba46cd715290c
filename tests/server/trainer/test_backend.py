"""The trainer backend seam: `trainer.backend` picks the backend; verl is imported only when asked for."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from alight_server.stacks.opening import TrainingStacks
from alight_server.trainer.backends.base import make_backend
from alight_server.trainer.backends.embedded import EmbeddedBackend
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.run.loop import TrainingRun


def test_the_embedded_backend_is_the_default(tiny_config: Callable[..., TrainConfig]) -> None:
    backend = make_backend(tiny_config())
    try:
        assert isinstance(backend, EmbeddedBackend)
        assert backend.world.size == 1
    finally:
        backend.close()


def test_verl_without_its_package_names_the_pip_fix(
    tiny_config: Callable[..., TrainConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "alight_server.trainer.backends.verl", None)  # as if not installed: import fails
    with pytest.raises(RuntimeError, match=r"pip install 'alight-server\[verl\]'"):
        make_backend(tiny_config(trainer={"backend": "verl"}))


def test_an_unknown_backend_is_a_config_error(tiny_config: Callable[..., TrainConfig]) -> None:
    with pytest.raises(ValueError, match=r"trainer\.backend: Input should be 'embedded' or 'verl'"):
        tiny_config(trainer={"backend": "deepspeed"})


@pytest.mark.skipif(importlib.util.find_spec("verl") is not None, reason="verl is installed here")
def test_alight_train_on_verl_without_verl_names_the_pip_fix_and_stops_its_server(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    config = tiny_config(trainer={"backend": "verl"})
    with pytest.raises(RuntimeError, match=r"the verl backend needs verl: pip install 'alight-server\[verl\]'"):
        TrainingRun(config, stacks=TrainingStacks(), show_progress=False).run()
    # the run's server (ReplicaStack) was up before the backend was built, and is gone again
    port = json.loads((Path(config.output_dir) / "stack.json").read_text())["server_port"]
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
