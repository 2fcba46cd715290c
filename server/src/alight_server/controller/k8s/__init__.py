"""The Kubernetes runner: each attempt a Job, watched, classified, retried and cleaned up (needs the `k8s` extra)."""

from __future__ import annotations

from alight_server.controller.k8s.classify import Limits
from alight_server.controller.k8s.images import ImageScan
from alight_server.controller.k8s.kube import INSTALL_HINT, load_configuration
from alight_server.controller.k8s.manifest import JobTemplate
from alight_server.controller.k8s.preflight import PERMISSIONS, preflight
from alight_server.controller.k8s.runner import KubernetesRunner

__all__ = [
    "INSTALL_HINT",
    "PERMISSIONS",
    "ImageScan",
    "JobTemplate",
    "KubernetesRunner",
    "Limits",
    "load_configuration",
    "preflight",
]
