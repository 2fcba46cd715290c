"""TODO: the attempt context (ids, mode, task, gateway URL, token) and reward/emit."""

from __future__ import annotations

from typing import Any


def current() -> Any:
    raise NotImplementedError


def reward(value: float, name: str | None = None, final: bool = False) -> None:
    raise NotImplementedError


def emit(name: str, **attributes: Any) -> None:
    raise NotImplementedError
