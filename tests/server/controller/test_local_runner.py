"""LocalRunner against real subprocesses: exit codes, spawn failures, group kills, adoption."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from controller_testkit import SCRIPTED, make_start, pid_alive, wait_until

from alight.attempt_logs import attempt_log_path
from alight.schemas import RunnerSpec
from alight_server.controller import outcome
from alight_server.controller.base import RunPhase, SpawnError
from alight_server.controller.local import LocalRunner


def finished(runner: LocalRunner, handle: str):
    return wait_until(lambda: (s := runner.poll(handle)).ended and s)


def test_exit_code_and_output_are_captured(logs_dir: Path) -> None:
    runner = LocalRunner(logs_dir)
    handle = runner.start(make_start("r1", task={"exit": 3, "say": "bye now"}))
    status = finished(runner, handle)
    assert (status.phase, status.exit_code) == (RunPhase.EXITED, 3)
    text = attempt_log_path(logs_dir, "r1", 1).read_text()
    assert "agent attempt 1 starting" in text and "bye now" in text
    assert runner.log_tail(handle, 8) == "bye now\n"


@pytest.mark.parametrize("rollout_id", ["r1", "..", "."])
def test_the_runner_writes_each_attempt_s_output_where_alight_logs_reads_it(logs_dir: Path, rollout_id: str) -> None:
    runner = LocalRunner(logs_dir)
    finished(runner, runner.start(make_start(rollout_id, attempt=2, task={"say": "found me"})))
    assert "found me" in attempt_log_path(logs_dir, rollout_id, 2).read_text()  # `..` is a folder name, not a way up


def test_child_gets_the_attempt_environment(logs_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "env.json"
    spec = RunnerSpec(command=SCRIPTED, env={"MY_FLAG": "on", "ALIGHT_TOKEN": "not-this-one"})
    runner = LocalRunner(
        logs_dir,
        agent_server_url="http://agents.example:8700",
        base_env={"PATH": os.environ["PATH"], "OPENAI_API_KEY": "sk-real", "ALIGHT_ADMIN_KEY": "alk_secret"},
    )
    handle = runner.start(make_start("r-env", attempt=2, task={"env_out": str(out)}, runner=spec))
    assert finished(runner, handle).exit_code == 0
    env = json.loads(out.read_text())
    assert env["OPENAI_BASE_URL"] == "http://agents.example:8700/gw/r-env/2/v1"
    assert env["OPENAI_API_KEY"] == env["ALIGHT_TOKEN"] == "alt1.test.token"  # never the controller's own key
    assert (env["ALIGHT_ROLLOUT_ID"], env["ALIGHT_ATTEMPT"], env["MY_FLAG"]) == ("r-env", "2", "on")
    assert env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == "http://agents.example:8700/v1/traces"
    assert "alight.rollout.id=r-env" in env["OTEL_RESOURCE_ATTRIBUTES"]
    assert "ALIGHT_ADMIN_KEY" not in env


HOST = {
    "PATH": os.environ["PATH"],
    "HOME": "/home/controller",
    "LC_TIME": "C",
    "HF_TOKEN": "hf_host_secret",
    "AWS_REGION": "eu-west-1",
    "AWS_SECRET_ACCESS_KEY": "aws_host_secret",
    "PYTHONPATH": "/controller/site",
    "ALIGHT_ADMIN_KEY": "alk_secret",
    "ALIGHT_SECRET_KEY": "fernet-key",
}


def agent_env(logs_dir: Path, tmp_path: Path, spec: RunnerSpec) -> dict[str, str]:
    out = tmp_path / "env.json"
    spec = spec.model_copy(update={"command": SCRIPTED})
    runner = LocalRunner(logs_dir, base_env=HOST)
    handle = runner.start(make_start("r-inherit", task={"env_out": str(out)}, runner=spec))
    assert finished(runner, handle).exit_code == 0
    return json.loads(out.read_text())


def test_an_agent_sees_no_host_variable_its_spec_did_not_name(logs_dir: Path, tmp_path: Path) -> None:
    env = agent_env(logs_dir, tmp_path, RunnerSpec())
    assert (env["PATH"], env["HOME"], env["LC_TIME"]) == (HOST["PATH"], "/home/controller", "C")  # the defaults
    leaked = {k for k, v in env.items() if v in HOST.values()} - {"PATH", "HOME", "LC_TIME"}
    assert not leaked and not {"HF_TOKEN", "AWS_REGION", "PYTHONPATH"} & set(env)


def test_an_agent_sees_the_host_variables_its_spec_names_by_name_or_pattern(logs_dir: Path, tmp_path: Path) -> None:
    env = agent_env(logs_dir, tmp_path, RunnerSpec(inherit_env=["HF_TOKEN", "AWS_*"]))
    assert env["HF_TOKEN"] == "hf_host_secret"
    assert (env["AWS_REGION"], env["AWS_SECRET_ACCESS_KEY"]) == ("eu-west-1", "aws_host_secret")
    assert "PYTHONPATH" not in env


def test_no_pattern_lets_the_runners_own_alight_variables_through(logs_dir: Path, tmp_path: Path) -> None:
    env = agent_env(logs_dir, tmp_path, RunnerSpec(inherit_env=["*"]))
    assert env["PYTHONPATH"] == "/controller/site"  # everything else was asked for
    assert "alk_secret" not in env.values() and "fernet-key" not in env.values()


def test_inherit_env_cannot_name_alight_variables() -> None:
    for pattern in ("ALIGHT_ADMIN_KEY", "alight_*", "HF TOKEN", "A=B"):
        with pytest.raises(ValueError, match="inherit_env entry"):
            RunnerSpec(command=["x"], inherit_env=[pattern])


def test_a_failure_naming_a_withheld_host_variable_says_which_setting_to_fix(logs_dir: Path) -> None:
    runner = LocalRunner(logs_dir, base_env=HOST)
    task = {"say": "Traceback ...\n    os.environ['HF_TOKEN']\nKeyError: 'HF_TOKEN'", "exit": 1}
    handle = runner.start(make_start("r-hint", task=task))
    status = finished(runner, handle)
    finish = outcome.decide(
        status, handle, None, lambda n: runner.log_tail(handle, n), lambda: runner.withheld_env(handle)
    )
    assert finish.failure_kind == "task" and finish.message
    assert "HF_TOKEN" in finish.message and "agent.inherit_env" in finish.message and "agent.env" in finish.message
    assert "hf_host_secret" not in finish.message  # the name, never the value


def test_a_failure_naming_a_variable_the_agent_had_gives_no_hint(logs_dir: Path) -> None:
    runner = LocalRunner(logs_dir, base_env=HOST)
    spec = RunnerSpec(command=SCRIPTED, inherit_env=["HF_TOKEN"])
    handle = runner.start(make_start("r-nohint", task={"say": "HF_TOKEN rejected: 401", "exit": 1}, runner=spec))
    finish = outcome.decide(
        finished(runner, handle),
        handle,
        None,
        lambda n: runner.log_tail(handle, n),
        lambda: runner.withheld_env(handle),
    )
    assert finish.message and "HF_TOKEN rejected" in finish.message and "inherit_env" not in finish.message


def test_missing_executable_is_a_failure_to_start(logs_dir: Path) -> None:
    runner = LocalRunner(logs_dir)
    handle = runner.start(make_start(runner=RunnerSpec(command=["/nonexistent/agent-binary"])))
    status = finished(runner, handle)
    assert status.phase is RunPhase.FAILED_TO_START
    assert "/nonexistent/agent-binary" in (status.message or "")


def test_missing_cwd_is_a_spawn_error(logs_dir: Path, tmp_path: Path) -> None:
    runner = LocalRunner(logs_dir)
    with pytest.raises(SpawnError, match="not a directory"):
        runner.start(make_start(runner=RunnerSpec(command=SCRIPTED, cwd=str(tmp_path / "nope"))))


def test_rollout_without_runner_spec_is_a_spawn_error(logs_dir: Path) -> None:
    start = make_start()
    start.rollout.runner = None
    with pytest.raises(SpawnError, match="no runner spec"):
        LocalRunner(logs_dir).start(start)


def test_starting_twice_runs_once(logs_dir: Path) -> None:
    runner = LocalRunner(logs_dir)
    start = make_start(task={"sleep": 0.3})
    assert runner.start(start) == runner.start(start)
    assert LocalRunner(logs_dir).start(start) == runner.handle_for("r1", 1)  # a restarted runner too
    assert finished(runner, runner.handle_for("r1", 1)).exit_code == 0
    assert attempt_log_path(logs_dir, "r1", 1).read_text().count("starting") == 1


def test_kill_reaches_a_grandchild_that_ignores_sigterm(logs_dir: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    runner = LocalRunner(logs_dir)
    handle = runner.start(make_start(task={"grandchild_pidfile": str(pidfile), "ignore_term": True, "sleep": 60}))
    grandchild = int(wait_until(lambda: pidfile.exists() and pidfile.read_text()))
    runner.kill(handle, grace_s=0.2)
    finished(runner, handle)  # the SIGKILL took the supervisor too, so the outcome is the kill itself
    wait_until(lambda: not pid_alive(grandchild), timeout_s=15)


def test_a_new_runner_adopts_a_running_attempt_and_reads_its_exit_code(logs_dir: Path) -> None:
    first = LocalRunner(logs_dir)
    handle = first.start(make_start(task={"sleep": 0.5, "exit": 4}))
    second = LocalRunner(logs_dir)  # what a restarted controller builds
    assert second.handles() == [handle]
    assert second.poll(handle).phase is RunPhase.RUNNING
    status = finished(second, handle)
    assert (status.phase, status.exit_code) == (RunPhase.EXITED, 4)
    second.release(handle)
    assert second.handles() == []
    assert attempt_log_path(logs_dir, "r1", 1).exists()  # the log outlives the state


def test_an_attempt_killed_behind_the_runners_back_is_lost(logs_dir: Path) -> None:
    first = LocalRunner(logs_dir)
    handle = first.start(make_start(task={"sleep": 60}))
    state = json.loads((logs_dir / "r1" / "1.state.json").read_text())
    os.killpg(state["pid"], signal.SIGKILL)  # agent and supervisor die together: no exit status written
    status = finished(LocalRunner(logs_dir), handle)
    assert status.phase is RunPhase.LOST


def test_a_recycled_pid_is_not_mistaken_for_the_agent(logs_dir: Path) -> None:
    runner = LocalRunner(logs_dir)
    handle = runner.start(make_start(task={"sleep": 60}))
    state_path = logs_dir / "r1" / "1.state.json"
    state = json.loads(state_path.read_text())
    try:
        # Pretend our agent died long ago and its pid now belongs to the test process itself.
        state_path.write_text(json.dumps({**state, "pid": os.getpid(), "proc_start": 1}))
        assert LocalRunner(logs_dir).poll(handle).phase is RunPhase.LOST
    finally:
        os.killpg(state["pid"], signal.SIGKILL)


def _owner_process(logs_dir: Path, tmp_path: Path, die_with_parent: bool) -> tuple[subprocess.Popen[bytes], int]:
    """A separate process that starts one hanging attempt (with a grandchild) and then waits: (it, grandchild pid)."""
    pidfile = tmp_path / "grandchild.pid"
    task = {"grandchild_pidfile": str(pidfile), "ignore_term": True, "sleep": 120}
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[1])\n"
        "from controller_testkit import make_start\n"
        "from alight_server.controller.local import LocalRunner\n"
        f"LocalRunner(sys.argv[2], die_with_parent={die_with_parent}).start(make_start(task={task!r}))\n"
        "time.sleep(120)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", code, str(Path(__file__).parent), str(logs_dir)])
    grandchild = int(wait_until(lambda: pidfile.exists() and pidfile.read_text()))
    return owner, grandchild


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_an_attempt_dies_with_a_stack_runner_killed_by_sigkill(logs_dir: Path, tmp_path: Path) -> None:
    owner, grandchild = _owner_process(logs_dir, tmp_path, die_with_parent=True)
    owner.kill()
    owner.wait()
    wait_until(lambda: not pid_alive(grandchild), timeout_s=15)
    # The next controller on this folder sees a lost attempt (no exit status): an infra failure.
    runner = LocalRunner(logs_dir)
    (handle,) = runner.handles()
    assert finished(runner, handle).phase is RunPhase.LOST


def test_a_restarted_stack_reaps_the_attempts_a_killed_one_left(logs_dir: Path, tmp_path: Path) -> None:
    owner, grandchild = _owner_process(logs_dir, tmp_path, die_with_parent=False)
    owner.kill()
    owner.wait()
    assert pid_alive(grandchild)  # `alight controller` semantics: agents outlive their controller
    runner = LocalRunner(logs_dir, die_with_parent=True)
    assert runner.reap_leftovers() == runner.handles()
    wait_until(lambda: not pid_alive(grandchild), timeout_s=15)
    assert finished(runner, runner.handles()[0]).phase is RunPhase.LOST
