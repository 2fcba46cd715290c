"""The controller: runs the server's queued attempts through a runner (local subprocesses, or Kubernetes Jobs in k8s/)."""

from __future__ import annotations

from alight_server.controller.base import Runner, RunPhase, RunStatus, SpawnError
from alight_server.controller.local import LocalRunner
from alight_server.controller.loop import Controller

__all__ = ["Controller", "LocalRunner", "RunPhase", "RunStatus", "Runner", "SpawnError"]
