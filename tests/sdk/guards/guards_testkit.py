"""What the guard tests share: the tiny buggy project and its test ids."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SANDBOX_PYTHON = REPO / ".venv-coding" / "bin" / "python"  # built by scripts/setup.sh (has pytest)
BUGGY = "def add(a, b):\n    return a - b\n\n\ndef double(x):\n    return 2 * x\n"
TESTS = (
    "from calc import add, double\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_double():\n    assert double(4) == 8\n"
)
FAIL_TO_PASS = ["tests/test_calc.py::test_add"]
PASS_TO_PASS = ["tests/test_calc.py::test_double"]
