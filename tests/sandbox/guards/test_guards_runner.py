"""The grading runner: an interpreter the workspace's files cannot take over, and outcomes that must agree."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from guards_testkit import (
    FORGE_BODY,
    FORGE_JUNIT,
    HIDDEN_EXIT_0,
    HIDDEN_FORGE,
    HIDDEN_FORGE_JUNIT,
    SANDBOX_PYTHON,
)

from alight_sandbox.guards import SandboxPolicy, run_tests
from alight_sandbox.guards import testrun as runs
from alight_sandbox.guards.interpreter import interpreter_modules
from alight_sandbox.guards.testrun import disagreements, junit_key

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or not SANDBOX_PYTHON.exists(),
    reason="bwrap or .venv-coding missing: bash scripts/setup.sh --coding",
)
FIXED = "def add(a, b):\n    return a + b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_other():\n    assert True\n"
SELECT = ["tests/test_calc.py::test_add", "tests/test_calc.py::test_other"]


def project(tmp_path: Path, calc: str = FIXED) -> SandboxPolicy:
    workspace, scratch = tmp_path / "workspace", tmp_path / "scratch"
    (workspace / "tests").mkdir(parents=True)
    scratch.mkdir()
    (workspace / "calc.py").write_text(calc)
    (workspace / "tests" / "test_calc.py").write_text(TESTS)
    return SandboxPolicy(workspace=str(workspace), scratch=str(scratch), python=str(SANDBOX_PYTHON))


def graded(policy: SandboxPolicy) -> runs.TestRun:
    return run_tests(policy, SELECT, pythonpath=["."], timeout_s=120)


def test_no_planted_module_is_imported_by_the_grading_interpreter(tmp_path: Path) -> None:
    # Every name the interpreter imports from its own paths (standard library, site-packages, the grader's
    # own modules, start-up hooks), planted at the root, in the tests folder and as a package, plus .pth
    # files: each writes a marker when it is imported.
    policy = project(tmp_path)
    workspace = Path(policy.workspace)
    # (Names pytest collects as test modules, *_test and test_*, are test files: restored before grading.)
    names = sorted(n for n in interpreter_modules(policy.python) if not n.endswith("_test") and n[:5] != "test_")
    assert {"pytest", "_pytest", "pluggy", "iniconfig", "json", "sitecustomize", "pytest_outcomes"} <= set(names)
    for name in names:
        marker = f"open('/tmp/imported-{name}', 'w').close()\n"
        (workspace / f"{name}.py").write_text(marker)
        (workspace / "tests" / f"{name}.py").write_text(marker)
    (workspace / "pkg").mkdir()
    (workspace / "pkg" / "json.py").write_text("open('/tmp/imported-pkg-json', 'w').close()\n")
    for where in (workspace, workspace / "tests"):
        (where / "zz_hook.pth").write_text("import os; open('/tmp/imported-pth', 'w').close()\n")
    run = graded(policy)
    assert run.outcomes == {n: "passed" for n in SELECT}, run.output[-3000:]
    assert sorted(p.name for p in Path(policy.scratch).glob("imported-*")) == []
    assert run.disagreements == []


def test_the_code_under_test_does_not_see_the_graders_options(tmp_path: Path) -> None:
    calc = FIXED + "import sys\nassert sys.argv[1:] == [], sys.argv\n"
    run = graded(project(tmp_path, calc))
    assert run.outcomes == {n: "passed" for n in SELECT}, run.output[-3000:]


def test_an_honest_run_has_three_sources_that_agree(tmp_path: Path) -> None:
    run = graded(project(tmp_path, FIXED.replace("a + b", "a - b")))
    assert run.outcomes == {SELECT[0]: "failed", SELECT[1]: "passed"}
    assert run.disagreements == []


def test_code_that_does_not_import_fails_every_test_without_a_disagreement(tmp_path: Path) -> None:
    run = graded(project(tmp_path, "def add(a, b):\n    return a +\n"))
    assert (run.outcomes, run.disagreements) == ({}, [])
    assert "1 error" in run.output


def test_skipped_and_expected_failures_are_no_disagreement(tmp_path: Path) -> None:
    policy = project(tmp_path)
    tests = "import pytest\n\n\ndef test_add():\n    pytest.skip('later')\n\n\n"
    tests += "@pytest.mark.xfail\ndef test_other():\n    assert False\n"
    (Path(policy.workspace) / "tests" / "test_calc.py").write_text(tests)
    run = graded(policy)
    assert (run.outcomes, run.disagreements) == ({n: "skipped" for n in SELECT}, [])


def test_a_report_forged_at_exit_is_a_second_report_in_the_pipe(tmp_path: Path) -> None:
    run = graded(project(tmp_path, FIXED.replace("a + b", "a - b") + HIDDEN_FORGE))
    assert any("the outcomes report is not one report" in d for d in run.disagreements), run.disagreements


def test_a_forger_that_ends_the_run_before_pytest_reports_leaves_no_junit_stream(tmp_path: Path) -> None:
    calc = FIXED.replace("a + b", "a - b") + FORGE_BODY + "\n\ndef add(a, b):\n    _forge()\n"
    run = graded(project(tmp_path, calc))
    assert run.outcomes[SELECT[0]] == "passed"  # the forger's word, and the only report written
    assert run.disagreements == ["pytest's JUnit stream is missing while the other exists (exit status 0)"]


def test_a_forger_that_writes_both_reports_and_leaves_mid_test_lacks_the_plugins_token(tmp_path: Path) -> None:
    # One consistent report in each pipe and exit 0, before pytest writes anything: only the token tells.
    calc = FIXED.replace("a + b", "a - b") + FORGE_JUNIT + "\n\ndef add(a, b):\n    _forge()\n"
    run = graded(project(tmp_path, calc))
    assert run.outcomes == {n: "passed" for n in SELECT}  # the forger's word
    assert run.disagreements == ["the outcomes report does not carry this run's token: the plugin did not write it"]


# Imported by the tests folder's own conftest.py (the start tree's, restored whole), so it runs before pytest
# configures its plugins: takes the token from the grader's pipe if it still holds it, then forges with it.
STEAL_TOKEN_AT_IMPORT = """
import os as _os

_argv = open("/proc/self/cmdline").read().split(chr(0))
_opts = {_argv[i]: _argv[i + 1] for i in range(len(_argv) - 1)}
try:
    _fd = _os.open(_opts["--outcomes-token"], _os.O_RDONLY | _os.O_NONBLOCK)
    STOLEN = _os.read(_fd, 256).decode()
except BlockingIOError:
    STOLEN = None


def add(a, b):
    import json
    ids = open(_opts["--outcomes-select"]).read().split()
    report = {"outcomes": {i: "passed" for i in ids}, "messages": {}, "exitstatus": 0, "token": STOLEN}
    open(_opts["--outcomes-out"], "w").write(json.dumps(report))
    junit = [a.split("=", 1)[1] for a in _argv if a.startswith("--junitxml=")][0]
    cases = "".join('<testcase classname="tests.test_calc" name="%s"/>' % i.split("::")[-1] for i in ids)
    open(junit, "w").write("<testsuites><testsuite>%s</testsuite></testsuites>" % cases)
    _os._exit(0)
"""


def test_code_a_conftest_imports_finds_the_token_already_taken(tmp_path: Path) -> None:
    policy = project(tmp_path, STEAL_TOKEN_AT_IMPORT)
    (Path(policy.workspace) / "tests" / "conftest.py").write_text("import calc  # noqa: F401\n")
    run = graded(policy)
    assert run.outcomes == {n: "passed" for n in SELECT}  # the forger's word
    assert run.disagreements == ["the outcomes report does not carry this run's token: the plugin did not write it"]


def test_outcomes_that_differ_test_by_test_are_each_a_disagreement() -> None:
    report = {"outcomes": {"tests/test_x.py::test_a": "passed", "tests/test_x.py::test_b": "passed"}, "exitstatus": 0}
    junit = b'<testsuites><testsuite><testcase classname="tests.test_x" name="test_a"><failure/></testcase>'
    junit += b'<testcase classname="tests.test_x" name="test_b"/></testsuite></testsuites>'
    assert disagreements(report, junit, 0) == [
        "tests.test_x::test_a: outcomes report passed, JUnit failed",
        "the process exited 0 while a test failed",
    ]


def test_a_forged_junit_report_after_pytests_own_is_not_one_report(tmp_path: Path) -> None:
    run = graded(project(tmp_path, FIXED.replace("a + b", "a - b") + HIDDEN_FORGE_JUNIT))
    assert any("pytest's JUnit stream is not one report" in d for d in run.disagreements), run.disagreements


def test_an_exit_status_forced_to_0_disagrees_with_the_report(tmp_path: Path) -> None:
    run = graded(project(tmp_path, FIXED.replace("a + b", "a - b") + HIDDEN_EXIT_0))
    assert "the outcomes report says exit status 1; the process exited 0" in run.disagreements


def test_a_report_forged_before_the_clock_runs_out_is_not_believed(tmp_path: Path) -> None:
    forge_then_wait = HIDDEN_FORGE.replace("    os._exit(0)", "    import time\n    time.sleep(60)")
    policy = project(tmp_path, FIXED.replace("a + b", "a - b") + forge_then_wait)
    run = run_tests(policy, SELECT, pythonpath=["."], timeout_s=8)
    assert (run.timed_out, run.outcomes) == (True, {})


def test_a_report_without_a_junit_stream_is_a_disagreement() -> None:
    report = {"outcomes": {"t.py::a": "passed"}, "messages": {}, "exitstatus": 0}
    assert disagreements(report, None, 0) == ["pytest's JUnit stream is missing while the other exists (exit status 0)"]


def test_a_run_that_reported_nothing_is_no_disagreement() -> None:
    assert disagreements(None, None, -9) == []


def test_junit_keys_follow_pytests_escaping_of_parameters() -> None:
    assert junit_key("tests/sub/test_x.py::TestA::test_b[1-\x00]") == "tests.sub.test_x.TestA::test_b[1-#x00]"
