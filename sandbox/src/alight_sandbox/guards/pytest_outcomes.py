"""pytest plugin mounted into graders' sandboxes: run only the listed tests, write each one's outcome as JSON.

Standalone on purpose (no alight imports): the sandbox's interpreter has pytest but not alight.
`python -m pytest -p pytest_outcomes --outcomes-out FILE [--outcomes-select FILE] [--outcomes-coverage FILE]`
With --outcomes-coverage (needs `coverage` in the sandbox's interpreter) it also writes which tests execute
each line of the files under the working directory: {file: {line: [node ids]}}, "" for import time.
With --outcomes-token (a pipe the grader fills) the report carries the token read from it before the project's
code was imported, so a report written by anything else is told apart. The report also names pytest's and
pluggy's functions, classes and methods that hold something else at the end of the session than when pytest
configured its plugins ("replaced"): an in-process forger's patch.

The token is read and the report opened in pytest_load_initial_conftests, run first: the initial conftest files
(a tests folder's conftest.py commonly imports the package under test) are imported after it, before
pytest_configure. pytest's code is taken at pytest_configure, after pytest's own plugins patched it (legacypath).
"""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import pytest

# pytest's and pluggy's own code: what no code the tests import may replace. A forger that patches
# TestReport.from_item_and_call makes every outcome source agree, so only pytest's code itself can tell.
_RUNNER_PACKAGES = ("pytest", "_pytest", "pluggy")
_CODE = (types.FunctionType, type, classmethod, staticmethod, property)
_vars, _isinstance = vars, isinstance  # taken before any project code runs, like os.write below


def pytest_addoption(parser):
    parser.addoption("--outcomes-out", default=None, help="write {nodeid: outcome} and failure messages here")
    parser.addoption("--outcomes-select", default=None, help="file of node ids, one a line: run only these")
    parser.addoption("--outcomes-coverage", default=None, help="write {file: {line: [node ids]}} here")
    parser.addoption("--outcomes-token", default=None, help="a pipe holding this run's token: read once, reported")


_state = {}  # the session's config: logreport hooks get only the report


def _runner_code():
    """Every function, class and method pytest's and pluggy's modules define, by dotted name."""
    held = {}
    for name, module in list(sys.modules.items()):
        if name.partition(".")[0] not in _RUNNER_PACKAGES or not _isinstance(module, types.ModuleType):
            continue
        for attr, value in list(_vars(module).items()):
            if not _isinstance(value, _CODE) or _package(value) not in _RUNNER_PACKAGES:
                continue  # an import from elsewhere (os, pathlib.Path) is not pytest's to guard
            held[f"{name}.{attr}"] = _parts(value)
            if _isinstance(value, type) and value.__module__ == name:  # its methods once, where it is defined
                for key, member in list(_vars(value).items()):
                    if _isinstance(member, _CODE):
                        held[f"{name}.{attr}.{key}"] = _parts(member)
    return held


def _package(value):
    return str(getattr(value, "__module__", None)).partition(".")[0]


def _parts(value):
    """What must stay the very same objects: the value and, for code, the function's body and defaults (a
    patch can swap a function's __code__ and leave the function in place)."""
    func = getattr(value, "__func__", None) or getattr(value, "fget", None) or value  # classmethod, property
    return (value, *(getattr(func, a, None) for a in ("__code__", "__defaults__", "__kwdefaults__")))


def _replaced(held):
    """The names in `held` that now hold something else (or nothing)."""
    now = _runner_code()
    # Functions and classes compare by identity; an equal code object or defaults tuple behaves the same.
    return sorted(name for name, parts in held.items() if now.get(name) != parts)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    # Ahead of pytest's own hook that imports the initial conftest files, the first of the project's code.
    options = early_config.known_args_namespace
    if options.outcomes_token:
        # Gone from the grader's pipe once read: a report written by anything but this plugin cannot carry it.
        fd = os.open(options.outcomes_token, os.O_RDONLY | os.O_NONBLOCK)
        try:
            _state["token"] = os.read(fd, 256).decode()
        except BlockingIOError:  # taken before this plugin ran: the report goes out without it, a disagreement
            _state["token"] = None
        finally:
            os.close(fd)
    if options.outcomes_out:
        # Written with this os.write: the grader's report is a named pipe, and what the project's code might do
        # to `open` later is moot.
        _state["out"] = (
            os.open(options.outcomes_out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
            os.write,
            os.close,
        )


def pytest_configure(config):
    config._outcomes = {}
    config._messages = {}
    _state["config"] = config
    # Here, not earlier: pytest's own plugins patch pytest in their configure hooks (legacypath does).
    _state["runner_code"] = _runner_code()
    if config.getoption("--outcomes-coverage"):
        import coverage  # pyright: ignore[reportMissingImports]  # in the sandbox's interpreter, not ours

        _state["coverage"] = coverage.Coverage(data_file=None, source=[str(Path.cwd())], branch=False)
        _state["coverage"].start()


def pytest_runtest_setup(item):
    # Setup, call and teardown lines all count for the test: a fixture can be what a mutation breaks.
    if "coverage" in _state:
        _state["coverage"].switch_context(item.nodeid)


def pytest_collection_modifyitems(session, config, items):
    select = config.getoption("--outcomes-select")
    if not select:
        return
    wanted = set(Path(select).read_text().split("\n")) - {""}
    config.hook.pytest_deselected(items=[item for item in items if item.nodeid not in wanted])
    items[:] = [item for item in items if item.nodeid in wanted]


def pytest_runtest_logreport(report):
    config = _state["config"]
    # A test passes only if setup, call and teardown all pass; the first failing phase decides.
    decides = report.outcome != "passed" or report.when == "call"
    if decides and config._outcomes.get(report.nodeid) not in ("failed", "skipped"):
        config._outcomes[report.nodeid] = report.outcome
    if report.failed and report.nodeid not in config._messages:
        crash = getattr(report.longrepr, "reprcrash", None)
        config._messages[report.nodeid] = (crash.message if crash else str(report.longrepr))[:2000]


def pytest_sessionfinish(session, exitstatus):
    if "coverage" in _state:
        _write_coverage(_state.pop("coverage"), session.config.getoption("--outcomes-coverage"))
    if "out" in _state:
        fd, write, close = _state.pop("out")
        data = {
            "outcomes": session.config._outcomes,
            "messages": session.config._messages,
            "exitstatus": int(exitstatus),
            "replaced": _replaced(_state["runner_code"]),
            "token": _state.get("token"),
        }
        view = memoryview(json.dumps(data).encode())
        while view:
            view = view[write(fd, view) :]
        close(fd)


def _write_coverage(cov, out):
    cov.stop()
    data = cov.get_data()
    root = str(Path.cwd()) + "/"
    lines = {}
    for file in data.measured_files():
        by_line = data.contexts_by_lineno(file)
        lines[file.removeprefix(root)] = {str(n): sorted(c) for n, c in by_line.items()}
    Path(out).write_text(json.dumps(lines))
