"""pytest plugin mounted into graders' sandboxes: run only the listed tests, write each one's outcome as JSON.

Standalone on purpose (no alight imports): the sandbox's interpreter has pytest but not alight.
`python -m pytest -p pytest_outcomes --outcomes-out FILE [--outcomes-select FILE]`
"""

from __future__ import annotations

import json
from pathlib import Path


def pytest_addoption(parser):
    parser.addoption("--outcomes-out", default=None, help="write {nodeid: outcome} and failure messages here")
    parser.addoption("--outcomes-select", default=None, help="file of node ids, one a line: run only these")


_state = {}  # the session's config: logreport hooks get only the report


def pytest_configure(config):
    config._outcomes = {}
    config._messages = {}
    _state["config"] = config


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
    out = session.config.getoption("--outcomes-out")
    if out:
        data = {
            "outcomes": session.config._outcomes,
            "messages": session.config._messages,
            "exitstatus": int(exitstatus),
        }
        Path(out).write_text(json.dumps(data))
