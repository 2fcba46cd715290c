"""The app's change hooks: parts that cache shared state (the gateway) register here; routes that change it call."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI

RolloutChangedHook = Callable[[str], None]  # (rollout_id): an attempt finished or the rollout moved
UpstreamsChangedHook = Callable[[], None]  # an upstream was registered or removed


def install(app: FastAPI) -> None:
    app.state.rollout_changed_hooks = []
    app.state.upstreams_changed_hooks = []


def rollout_changed(app: FastAPI, rollout_id: str) -> None:
    hooks: list[RolloutChangedHook] = app.state.rollout_changed_hooks
    for hook in hooks:
        hook(rollout_id)


def upstreams_changed(app: FastAPI) -> None:
    hooks: list[UpstreamsChangedHook] = app.state.upstreams_changed_hooks
    for hook in hooks:
        hook()
