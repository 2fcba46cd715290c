"""A fake Kubernetes cluster on loopback for the Kubernetes runner's tests: real HTTP, real JSON, real watches."""

from __future__ import annotations

from alight_testing.fake_k8s.cluster import FakeCluster

__all__ = ["FakeCluster"]
