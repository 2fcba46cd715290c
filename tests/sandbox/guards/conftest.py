"""Fixtures for the sandbox and gate tests: a tiny project with one bug, and the sandbox's interpreter."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from guards_testkit import BUGGY, CASES, SANDBOX_PYTHON, TESTS

from alight_sandbox.guards import Episode, prepare_episode


def _missing() -> str | None:
    for tool in ("bwrap", "strace"):
        if shutil.which(tool) is None:
            return f"{tool} missing: bash scripts/setup.sh --coding (apt-get install -y bubblewrap strace, as root)"
    if not SANDBOX_PYTHON.exists():
        return f"{SANDBOX_PYTHON} missing: bash scripts/setup.sh --coding builds it"
    return None


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The buggy project as a git checkout whose history holds the fix (what an agent must not read)."""
    return _make_checkout(tmp_path / "checkout")


@pytest.fixture(scope="module")
def shared_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`checkout`, made once for a module whose tests only read it (grading copies it, never writes it)."""
    return _make_checkout(tmp_path_factory.mktemp("shared") / "checkout")


def _make_checkout(root: Path) -> Path:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    (root / "tests" / "data").mkdir(parents=True)
    (root / "tests" / "data" / "cases.json").write_text(CASES)
    (root / "calc.py").write_text(BUGGY.replace("a - b", "a + b"))
    (root / "tests" / "test_calc.py").write_text(TESTS)
    (root / "tests" / "test_helpers.py").write_text("def test_visible():\n    assert True\n")
    (root / "pyproject.toml").write_text('[project]\nname = "calc"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n')
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(root)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "the fix"], check=True)
    (root / "calc.py").write_text(BUGGY)
    return root


@pytest.fixture
def episode(checkout: Path, tmp_path: Path) -> Iterator[Episode]:
    """The episode's session; its workspace's tmpfs (where this process may mount one) is released after."""
    made = prepare_episode(
        checkout, tmp_path / "session", python=str(SANDBOX_PYTHON), hidden_tests=["tests/test_calc.py"]
    )
    yield made
    made.close()


@pytest.fixture
def agent(episode: Episode) -> Callable[[str], subprocess.CompletedProcess[str]]:
    """A scripted agent: each command goes through the launcher exactly as mini-swe-agent's bubblewrap
    environment calls it (`EXECUTABLE -m alight_sandbox.guards.launch SESSION --bind CWD CWD --chdir CWD ... bash -c`)."""

    def act(command: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "alight_sandbox.guards.launch", str(episode.session)]
        argv += ["--bind", "/workspace", "/workspace", "--chdir", "/workspace", "--setenv", "PAGER", "cat"]
        return subprocess.run([*argv, "bash", "-c", command], capture_output=True, text=True, timeout=120)

    return act
