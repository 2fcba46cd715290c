"""A step's freed tensors go back to the system, and the trainer keeps no gradients between steps."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from alight_server.trainer.backends.embedded import EmbeddedBackend
from alight_server.trainer.backends.heap import release_freed_memory
from alight_server.trainer.backends.policy_set import make_policy_set
from alight_server.trainer.config.run import TrainConfig
from alight_testing.batches import batch_for


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim; elsewhere a no-op")
def test_freed_tensors_below_the_mmap_threshold_go_back_to_the_system() -> None:
    # 2,000 tensors of 100 KB (under glibc's 128 KB mmap threshold: they come from the heap, as a step's many
    # activations do), all freed but the last, which pins the heap's top so glibc cannot shrink it by itself
    tensors = [torch.ones(25_000) for _ in range(2_000)]  # 200 MB
    last = tensors[-1]
    del tensors
    before = rss_mb()
    release_freed_memory()
    assert rss_mb() < before - 150, "the freed 200 MB stayed in the process"
    assert last.sum() == 25_000


def test_a_step_keeps_no_gradients_until_the_next(tiny_config: Callable[..., TrainConfig]) -> None:
    backend = make_policy_set(tiny_config()).one
    assert isinstance(backend, EmbeddedBackend)
    backend.step(batch_for(backend.model))
    assert all(p.grad is None for p in backend.model.parameters())
