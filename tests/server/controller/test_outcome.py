"""The mapping from how an attempt ended to what the server is told, case by case."""

from __future__ import annotations

import signal

import pytest

from alight.schemas import FailureKind
from alight_server.controller.base import RunPhase, RunStatus
from alight_server.controller.outcome import decide

H = "local@test/r1/1"


def test_exit_zero_succeeds() -> None:
    finish = decide(RunStatus(RunPhase.EXITED, exit_code=0), H)
    assert (finish.status, finish.failure_kind, finish.exit_code, finish.runner_handle) == ("succeeded", None, 0, H)


def test_nonzero_exit_is_a_task_failure_quoting_the_output() -> None:
    finish = decide(RunStatus(RunPhase.EXITED, exit_code=3), H, log_tail=lambda n: "Traceback...\nValueError: no\n")
    assert (finish.status, finish.failure_kind, finish.exit_code) == ("failed", FailureKind.TASK, 3)
    assert finish.message == "agent exited with code 3; last output:\nTraceback...\nValueError: no"


def test_the_quoted_output_is_bounded_and_keeps_its_end() -> None:
    output = "".join(f"line {i}\n" for i in range(100_000))  # ~1 MB, more than any runner should hand back
    finish = decide(RunStatus(RunPhase.EXITED, exit_code=1), H, log_tail=lambda n: output)
    assert finish.message is not None
    quoted = finish.message.split("last output:\n", 1)[1]
    assert 0 < len(quoted) <= 2000
    assert quoted.endswith("line 99999")


@pytest.mark.parametrize("phase", [RunPhase.FAILED_TO_START, RunPhase.LOST])
def test_failing_to_start_or_losing_the_process_is_infra(phase: RunPhase) -> None:
    finish = decide(RunStatus(phase, message="no such file: agent"), H)
    assert (finish.failure_kind, finish.message) == (FailureKind.INFRA, "no such file: agent")


def test_a_sigkill_the_controller_did_not_send_is_infra() -> None:
    finish = decide(RunStatus(RunPhase.EXITED, exit_code=-signal.SIGKILL), H)
    assert finish.failure_kind is FailureKind.INFRA


def test_a_signal_other_than_sigkill_is_the_agents_own_failure() -> None:
    assert decide(RunStatus(RunPhase.EXITED, exit_code=-signal.SIGSEGV), H).failure_kind is FailureKind.TASK


@pytest.mark.parametrize("status", [RunStatus(RunPhase.EXITED, exit_code=0), RunStatus(RunPhase.LOST)])
def test_the_controllers_own_kill_reason_outranks_the_exit(status: RunStatus) -> None:
    finish = decide(status, H, stopped=(FailureKind.TIMEOUT, "killed after 5s"))
    assert (finish.status, finish.failure_kind, finish.message) == ("failed", FailureKind.TIMEOUT, "killed after 5s")
