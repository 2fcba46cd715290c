"""The Kubernetes runner: each attempt a Job, watched, classified, retried and cleaned up (needs the `k8s` extra)."""

from __future__ import annotations

from alight_server.controller.k8s.classify import Limits as Limits
from alight_server.controller.k8s.images import ImageScan as ImageScan
from alight_server.controller.k8s.kube import load_configuration as load_configuration
from alight_server.controller.k8s.manifest import JobTemplate as JobTemplate
from alight_server.controller.k8s.preflight import PERMISSIONS as PERMISSIONS
from alight_server.controller.k8s.preflight import preflight as preflight
from alight_server.controller.k8s.runner import KubernetesRunner as KubernetesRunner
