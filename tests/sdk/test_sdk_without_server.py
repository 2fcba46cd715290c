"""The SDK stands alone: no alight module imports alight_server, and `alight` works with the server uninstalled."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import alight
from tests.hidden_package import without

SDK = Path(alight.__file__).parent

# Run first in the child: Python then knows neither the module nor the distribution alight-server,
# exactly as in an agent image where only the SDK was installed.
WITHOUT_SERVER = without("alight_server", "alight-server")


def _run_without_server(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_SERVER + code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},  # rich wraps help text at the terminal's width
    )


def test_no_sdk_module_imports_the_server() -> None:
    offenders = []
    for path in sorted(SDK.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{path.relative_to(SDK)}:{node.lineno} {n}" for n in names if n.split(".")[0] == "alight_server"
            ]
    assert offenders == []


def test_every_sdk_module_imports_with_the_server_uninstalled(tmp_path: Path) -> None:
    code = """
import json, pkgutil, importlib, alight
failed = {}
for info in pkgutil.walk_packages(alight.__path__, "alight."):
    try:
        importlib.import_module(info.name)
    except Exception as exc:
        failed[info.name] = repr(exc)
print(json.dumps(failed))
"""
    done = _run_without_server(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {}


def test_the_cli_names_the_server_package_when_it_is_uninstalled(tmp_path: Path) -> None:
    done = _run_without_server("from alight.cli import main; sys.argv = ['alight', '--help']; main()", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "pip install alight-server" in done.stdout
    assert " run " in done.stdout
    assert " serve " not in done.stdout


def test_alight_run_without_a_server_url_asks_for_the_server_package(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text("def main(task):\n    return None\n")
    argv = ["alight", "run", "agent.py:main", "--task", "{}"]
    done = _run_without_server(f"from alight.cli import main; sys.argv = {argv!r}; main()", tmp_path)
    assert done.returncode == 2
    assert "pip install alight-server" in done.stderr


def test_importing_every_sdk_module_loads_no_sandbox_server_or_heavy_library(tmp_path: Path) -> None:
    """What an agent installs with `pip install alight`: the coding kit and the server stay out of its process."""
    code = """
import json, pkgutil, importlib, alight
for info in pkgutil.walk_packages(alight.__path__, "alight."):
    importlib.import_module(info.name)
heavy = ("alight_sandbox", "alight_server", "alight_testing", "fastapi", "sqlalchemy", "torch", "transformers")
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy)))
"""
    done = _run_without_server(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_the_sdk_folder_holds_no_sandbox_gate_or_cli_harness() -> None:
    """The coding kit is its own distribution (sandbox/, alight-sandbox): nothing of it is left in the SDK."""
    assert sorted(p.name for p in SDK.iterdir() if p.name in {"guards", "harness", "quoting.py", "cleaning.py"}) == []
