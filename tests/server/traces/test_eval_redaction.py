"""`alight eval` prints for people: an error quoting captured content shows it redacted (docs/data.md "Redaction")."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from alight.cli import app as cli
from tests.server.redaction.planted import SECRETS
from tests.server.traces.conftest import imported_for_eval

# An evaluator that fails quoting the prompt it was given, as a careless scoring function's error would.
QUOTING = """
def score(task, trajectory):
    raise ValueError("cannot score: " + trajectory.calls[0].call.request["messages"][0]["content"])
"""


def test_alight_eval_prints_an_error_quoting_a_captured_secret_redacted(
    tmp_path: Path, upstream_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALIGHT_SECRET_KEY", "eval-redaction-secret")
    key = SECRETS["aws_access_key_id"]
    db = imported_for_eval(tmp_path, upstream_url, [f"call get_weather, my key is {key}"], QUOTING)
    runner = CliRunner()
    scored = runner.invoke(cli, ["eval", str(tmp_path / "config.yaml"), "--traces", "prod", "--db", db])
    assert "cannot score: call get_weather, my key is [REDACTED:" in scored.output, scored.output
    assert key not in scored.output
