"""The coding example's tests (test_coding_*) need its sandbox tools and .venv-coding (`bash scripts/setup.sh --coding` installs both)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "coding"
VENV = REPO / ".venv-coding"


@pytest.fixture(autouse=True, scope="module")  # module: before the modules' own module fixtures
def coding_tools(request: pytest.FixtureRequest) -> None:
    if not request.module.__name__.rpartition(".")[2].startswith("test_coding"):
        return  # another example's tests (test_scienceworld.py ...) need none of these
    for tool in ("bwrap", "strace"):
        if shutil.which(tool) is None:
            pytest.skip(
                f"{tool} missing: bash scripts/setup.sh --coding (apt-get install -y bubblewrap strace, as root)"
            )
    if not (VENV / "bin" / "mini").exists():
        pytest.skip(f"{VENV}/bin/mini missing: bash scripts/setup.sh --coding builds it")
    if str(EXAMPLE) not in sys.path:
        sys.path.insert(0, str(EXAMPLE))
