"""`alight data import` refuses what it cannot do well before touching the store, saying what to pass instead."""

from __future__ import annotations

from typer.testing import CliRunner

from alight.cli import app as cli
from tests.server.traces.conftest import log_conversation


def test_text_only_traces_without_a_model_are_refused_naming_the_option(tmp_path, upstream_url, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "calls.jsonl"
    log_conversation(upstream_url, path, "call get_weather", ids=False)
    db = tmp_path / "alight.db"
    done = CliRunner().invoke(cli, ["data", "import", str(path), "--format", "openai", "--name", "p", "--db", str(db)])
    assert done.exit_code == 2 and "2 calls were logged as text only" in done.output and "--model" in done.output
    assert not db.exists()  # nothing half-imported


def test_an_unknown_format_a_bad_name_and_an_unknown_model_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "calls.jsonl"
    path.write_text("")
    runner = CliRunner()
    base = ["data", "import", str(path), "--db", str(tmp_path / "a.db")]
    fmt = runner.invoke(cli, [*base, "--format", "langsmith", "--name", "p"])
    assert fmt.exit_code == 2 and "use one of otel, openai, claude-code, codex, alight" in fmt.output
    name = runner.invoke(cli, [*base, "--format", "openai", "--name", "prod-1"])
    assert name.exit_code == 2 and "no '-'" in name.output
    model = runner.invoke(cli, [*base, "--format", "openai", "--name", "p", "--model", "no-such-model"])
    assert model.exit_code == 2 and "cannot load the tokenizer of model 'no-such-model'" in model.output
