"""No episode can exhaust the host: a fork bomb, a memory hog and a disk filler are each stopped at their bound.

Each is a scripted agent's command through the launcher (as mini-swe-agent's actions run), with small bounds
so the test takes a second: the sandbox is killed, the episode's next command is refused, and the grade is
reward 0 with a `resource_limit` gate saying what was hit. Once with the machine's strongest mechanisms
(cgroups and a tmpfs where this process may make them) and once with the fallback a pod without privileges
has (`privileged=False`, the commands run as an unprivileged user: RLIMIT_NPROC, RLIMIT_AS and the
watchdog). The honest fix under the same bounds still gets 1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from guards_testkit import FAIL_TO_PASS, FIX, PASS_TO_PASS, SANDBOX_PYTHON

from alight_sandbox.guards import Episode, cgroups, grade_episode, prepare_episode
from alight_sandbox.guards import rules as r
from alight_sandbox.guards.bounds import group_prefix
from alight_sandbox.guards.cgroups import ROOT
from alight_sandbox.guards.disk import is_bounded
from alight_sandbox.guards.policy import Totals

Agent = Callable[[str], subprocess.CompletedProcess[str]]
MB = 1024 * 1024
NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
SMALL = Totals(workspace_mb=48, total_memory_mb=192, pids=48)
# name -> (the agent's command, a fragment of the evidence the bound it hits must give)
HOGS = {
    "fork_bomb": ("bomb() { bomb | bomb & }; bomb; sleep 30", "pids limit 48 reached"),
    "memory_hog": (
        # Eight processes of 40 MB each, every one under any per-process limit: only a total bound stops them.
        "for i in 1 2 3 4 5 6 7 8; do python3 -c 'b = bytearray(40 << 20); import time; time.sleep(30)' & done; wait",
        "memory limit 192 MB",
    ),
    # Files of 20 MB, each under the per-file limit, until the disk is full: only the workspace's total stops it.
    "disk_filler": ("for i in $(seq 1 100); do head -c 20000000 /dev/zero > fill-$i.bin; done", "workspace reached"),
}


def _cgroups_of(episode: Episode) -> set[Path]:
    return {p for p in ROOT.glob(f"*/**/{group_prefix(episode.policy)}*") if p.is_dir()}


@pytest.fixture(params=[True, False], ids=["privileged", "fallback"])
def bounded(request: pytest.FixtureRequest, checkout: Path, tmp_path: Path) -> Iterator[Episode]:
    """An episode with SMALL bounds: with cgroups and a tmpfs, or the fallback alone as a pod without privileges
    has it (`privileged=False`, its commands run as an unprivileged user: nobody, when this process is root)."""
    privileged = request.param
    home = tmp_path if privileged or os.geteuid() != 0 else Path(tempfile.mkdtemp(prefix="alight-fallback-"))
    episode = prepare_episode(
        checkout,
        home / "session",
        python=str(SANDBOX_PYTHON),
        hidden_tests=["tests/test_calc.py"],
        bounds=SMALL,
        privileged=privileged,
    )
    if home != tmp_path:
        # Root's interpreter install is out of nobody's reach: its commands use the system's python3. The grader
        # (this process) keeps the episode's interpreter.
        replace(episode.policy, python="").save(episode.session / "policy.json")
        home.chmod(0o755)
        for folder, _, names in os.walk(home):
            for name in [folder, *(os.path.join(folder, n) for n in names)]:
                os.lchown(name, NOBODY, NOBODY)
    yield episode
    episode.close()
    if home != tmp_path:
        shutil.rmtree(home)


def act(episode: Episode, command: str) -> subprocess.CompletedProcess[str]:
    user = [] if episode.policy.privileged or os.geteuid() != 0 else AS_NOBODY
    argv = [*user, sys.executable, "-m", "alight_sandbox.guards.launch", str(episode.session), "--chdir", "/workspace"]
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
    assert written <= bounded.policy.workspace_mb * MB * (1 if bounded.policy.privileged and os.geteuid() == 0 else 4)


def test_the_honest_fix_under_the_same_bounds_gets_reward_1(bounded: Episode, checkout: Path) -> None:
    act(bounded, f"ls; {FIX}; python3 -c 'import calc; print(calc.add(2, 3))'")
    grade = grade_episode(bounded, checkout, FAIL_TO_PASS, PASS_TO_PASS)
    assert (grade.reward, grade.violations) == (1.0, [])
    privileged = bounded.policy.privileged
    if privileged and os.geteuid() == 0:  # where this process may make them: the kernel's own bounds applied
        assert grade.report.bounds["disk"] == "tmpfs --size"
    if not privileged:
        assert grade.report.bounds["pids"].startswith(("watchdog", "RLIMIT_NPROC"))
        assert grade.report.bounds["disk"].startswith("watchdog")


def test_each_sandbox_cgroup_and_the_workspace_mount_are_removed_after(checkout: Path, tmp_path: Path) -> None:
    episode = prepare_episode(checkout, tmp_path / "session", python=str(SANDBOX_PYTHON), bounds=SMALL)
    mounted = is_bounded(episode.workspace)
    act(episode, HOGS["fork_bomb"][0])
    act(episode, "true")
    assert _cgroups_of(episode) == set()
    episode.close()
    assert not is_bounded(episode.workspace) and not is_bounded(episode.session / "disk")
    assert (episode.workspace / "calc.py").exists()  # the workspace is back on the disk, for inspection
    if os.geteuid() == 0:
        assert mounted


def test_a_delegated_cgroup_v2_group_gets_both_bounds_and_reports_what_was_hit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cgroup v2's files, on a folder standing in for a delegated /sys/fs/cgroup (this machine's pids and memory
    controllers are bound to v1): the limits written where the kernel reads them, its counters read back."""
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("memory pids\n")
    monkeypatch.setattr(cgroups, "ROOT", tmp_path)
    monkeypatch.setattr(cgroups, "_own_group", lambda controller: "/")
    group = cgroups.create_cgroup("alight-v2", pids=48, memory_mb=192)
    assert group is not None and group.mechanism == "cgroup v2"
    folder = tmp_path / "alight-v2"
    assert (folder / "pids.max").read_text() == "48"
    assert (folder / "memory.max").read_text() == str(192 * MB)
    assert group.hit() == ""
    (folder / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n")
    assert group.hit() == "memory limit 192 MB: OOM kill"
    (folder / "pids.events").write_text("max 7\n")
    assert group.hit() == "pids limit 48 reached (fork refused)"


def test_a_group_whose_owner_was_killed_is_removed_by_the_next_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """An attempt killed mid-command (timed out, cancelled) never removes its group; the next one made does."""
    orphan = cgroups.create_cgroup("alight-orphan-test", pids=8, memory_mb=64)
    if orphan is None:
        pytest.skip("no cgroup can be made here: the fallback applies, and it leaves no group behind")
    monkeypatch.setattr(cgroups, "STALE_S", 0.0)  # its owner is gone; no process is in it
    fresh = cgroups.create_cgroup("alight-fresh-test", pids=8, memory_mb=64)
    assert fresh is not None
    fresh.remove()
    assert not any(folder.exists() for folder in orphan.folders)
