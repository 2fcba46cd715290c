"""No episode can exhaust the host: a fork bomb, a memory hog and a disk filler are each stopped at their bound.

Each is a scripted agent's command through the launcher (as mini-swe-agent's actions run), with small bounds
so the test takes a second: the sandbox is killed, the episode's next command is refused, and the grade is
reward 0 with a `resource_limit` gate saying what was hit. Once with the machine's strongest mechanisms
(cgroups and a tmpfs where this process may make them) and once with the unprivileged fallback alone
(rlimits and the watchdog), which every pod has. The honest fix under the same bounds still gets 1.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from guards_testkit import FAIL_TO_PASS, FIX, PASS_TO_PASS, SANDBOX_PYTHON

from alight_sandbox.guards import Episode, grade_episode, prepare_episode
from alight_sandbox.guards import rules as r
from alight_sandbox.guards.cgroups import ROOT
from alight_sandbox.guards.disk import is_bounded
from alight_sandbox.guards.policy import Totals

Agent = Callable[[str], subprocess.CompletedProcess[str]]
MB = 1024 * 1024
SMALL = Totals(workspace_mb=48, total_memory_mb=192, pids=48)
# name -> (the agent's command, a fragment of the evidence the bound it hits must give)
HOGS = {
    "fork_bomb": ("bomb() { bomb | bomb & }; bomb; sleep 30", "pids limit 48 reached"),
    "memory_hog": (
        # Eight processes of 40 MB each, every one under any per-process limit: only a total bound stops them.
        "for i in 1 2 3 4 5 6 7 8; do python -c 'b = bytearray(40 << 20); import time; time.sleep(30)' & done; wait",
        "memory limit 192 MB",
    ),
    # Files of 20 MB, each under the per-file limit, until the disk is full: only the workspace's total stops it.
    "disk_filler": ("for i in $(seq 1 100); do head -c 20000000 /dev/zero > fill-$i.bin; done", "workspace reached"),
}


def _alight_cgroups() -> set[Path]:
    return {p for p in ROOT.glob("*/**/alight-*") if p.is_dir()}


@pytest.fixture(params=[True, False], ids=["privileged", "fallback"])
def bounded(request: pytest.FixtureRequest, checkout: Path, tmp_path: Path) -> Iterator[Episode]:
    episode = prepare_episode(
        checkout,
        tmp_path / "session",
        python=str(SANDBOX_PYTHON),
        hidden_tests=["tests/test_calc.py"],
        bounds=SMALL,
        privileged=request.param,
    )
    yield episode
    episode.close()


def act(episode: Episode, command: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "alight_sandbox.guards.launch", str(episode.session), "--chdir", "/workspace"]
    return subprocess.run([*argv, "bash", "-c", command], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("hog", sorted(HOGS))
def test_an_episode_that_reaches_a_total_bound_is_stopped_with_reward_0(
    bounded: Episode, checkout: Path, hog: str
) -> None:
    command, evidence = HOGS[hog]
    done = act(bounded, command)
    assert "the sandbox was killed and the episode stopped" in done.stdout
    refused = act(bounded, FIX)  # the fix after the stop never runs
    assert "no further commands run" in refused.stdout
    grade = grade_episode(bounded, checkout, FAIL_TO_PASS, PASS_TO_PASS)
    gates = {v.rule: v.evidence for v in grade.violations}
    assert grade.reward == 0.0
    assert evidence in gates[r.RESOURCE_LIMIT], gates
    written = sum(f.stat().st_size for f in bounded.workspace.glob("fill-*"))
    # A tmpfs refuses the byte past its size; the watchdog stops the writer within a poll or two.
    assert written <= SMALL["workspace_mb"] * MB * (1 if bounded.policy.privileged and os.geteuid() == 0 else 2)


def test_the_honest_fix_under_the_same_bounds_gets_reward_1(bounded: Episode, checkout: Path) -> None:
    act(bounded, f"ls; {FIX}; python -c 'import calc; print(calc.add(2, 3))'")
    grade = grade_episode(bounded, checkout, FAIL_TO_PASS, PASS_TO_PASS)
    assert (grade.reward, grade.violations) == (1.0, [])
    privileged = bounded.policy.privileged
    if privileged and os.geteuid() == 0:  # where this process may make them: the kernel's own bounds applied
        assert grade.report.bounds["disk"] == "tmpfs --size"
    if not privileged:
        assert grade.report.bounds["pids"].startswith(("watchdog", "RLIMIT_NPROC"))
        assert grade.report.bounds["disk"].startswith("watchdog")


def test_each_sandbox_cgroup_and_the_workspace_mount_are_removed_after(checkout: Path, tmp_path: Path) -> None:
    before = _alight_cgroups()
    episode = prepare_episode(checkout, tmp_path / "session", python=str(SANDBOX_PYTHON), bounds=SMALL)
    mounted = is_bounded(episode.workspace)
    act(episode, HOGS["fork_bomb"][0])
    act(episode, "true")
    assert _alight_cgroups() == before
    episode.close()
    assert not is_bounded(episode.workspace) and not is_bounded(episode.session / "disk")
    assert (episode.workspace / "calc.py").exists()  # the workspace is back on the disk, for inspection
    if os.geteuid() == 0:
        assert mounted
