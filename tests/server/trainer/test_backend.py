"""The trainer backend seam: `trainer.backend` picks the backend; verl is imported only when asked for."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from alight_server.trainer.backend import make_backend
from alight_server.trainer.config import TrainConfig
from alight_server.trainer.embedded import EmbeddedBackend


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
    monkeypatch.setitem(sys.modules, "alight_server.trainer.verl", None)  # as if not installed: import fails
    with pytest.raises(RuntimeError, match=r"pip install 'alight-server\[verl\]'"):
        make_backend(tiny_config(trainer={"backend": "verl"}))


def test_an_unknown_backend_is_a_config_error(tiny_config: Callable[..., TrainConfig]) -> None:
    with pytest.raises(ValueError, match=r"trainer\.backend: Input should be 'embedded' or 'verl'"):
        tiny_config(trainer={"backend": "deepspeed"})
