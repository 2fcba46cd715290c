"""`alight data check`: the sample builder's view of imported traces, breaks with the first differing token."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from alight.cli import app as cli
from alight_server.traces.check import check_run
from alight_server.traces.formats import openai_log
from alight_server.traces.importer import import_traces
from alight_server.trainer.step.samples import SampleConfig
from tests.server.traces.conftest import log_conversation


def test_a_rendered_trajectory_whose_template_drifts_is_reported_with_the_first_differing_token(
    tmp_path, store, upstream_url, renderer
):
    # The agent offers its tools on the first turn only: the template renders the same conversation with a
    # different system turn, so the second prompt no longer continues the first call.
    path = tmp_path / "calls.jsonl"
    log_conversation(upstream_url, path, "call get_weather", ids=False, tools_on_second=False)
    import_traces(store, "drift", "openai", openai_log.read([path]), renderer)
    report = check_run(store, "drift", decode=renderer.decode)
    (trajectory,) = report.trajectories
    assert (trajectory.calls, trajectory.rendered, trajectory.rows, trajectory.conversations) == (2, 2, 2, 1)
    assert report.breaks == {"template_drift": 1} and trajectory.breaks == {"template_drift": 1}
    (divergence,) = trajectory.divergences
    assert (divergence.previous, divergence.call, divergence.cause) == (0, 1, "template_drift")
    system = "<|im_start|>system\nYou are a helpful assistant."
    assert renderer.decode(renderer.render_ids(system)) == system
    assert divergence.position == len(renderer.render_ids(system))
    assert divergence.expected_text is not None and divergence.expected_text.startswith("\n")  # "\n\n# Tools"
    assert divergence.prompt_text is not None and divergence.prompt_text.startswith("<|im_end|>")


def test_a_continuing_rendered_trajectory_merges_into_one_row_with_no_break(tmp_path, store, upstream_url, renderer):
    path = tmp_path / "calls.jsonl"
    log_conversation(upstream_url, path, "call get_weather", ids=False)
    import_traces(store, "merged", "openai", openai_log.read([path]), renderer)
    report = check_run(store, "merged", decode=renderer.decode)
    (trajectory,) = report.trajectories
    assert (trajectory.rows, trajectory.breaks, trajectory.divergences) == (1, {}, [])
    assert report.build["rows"] == 1 and report.unscored == 1


def test_the_check_command_prints_the_table_and_the_json_report(tmp_path, upstream_url, renderer, monkeypatch):
    monkeypatch.setenv("ALIGHT_SECRET_KEY", "check-test-secret")
    monkeypatch.setenv("COLUMNS", "80")  # not a terminal: a table keeps its columns whole whatever COLUMNS says
    db = f"sqlite:///{tmp_path / 'alight.db'}"
    path = tmp_path / "calls.jsonl"
    log_conversation(upstream_url, path, "call get_weather", ids=False, tools_on_second=False)
    runner = CliRunner()
    done = runner.invoke(
        cli, ["data", "import", str(path), "--format", "openai", "--name", "prod", "--model", "tiny", "--db", db]
    )
    assert done.exit_code == 0, done.output
    assert "1 new rollouts" in done.output and "2 rendered" in done.output
    table = runner.invoke(cli, ["data", "check", "prod", "--model", "tiny", "--db", db])
    assert table.exit_code == 0, table.output
    (row,) = [line for line in table.output.splitlines() if "template_drift 1" in line]
    assert "call 1 token" in row and "<|im_end|>" in row, table.output  # one trajectory, one line
    as_json = runner.invoke(cli, ["data", "check", "prod", "--db", db, "--json"])
    report = json.loads(as_json.output)
    assert report["breaks"] == {"template_drift": 1} and report["trajectories"][0]["rendered"] == 2


def test_rows_over_the_configs_response_limit_are_counted_as_truncated(tmp_path, store, upstream_url, renderer):
    path = tmp_path / "calls.jsonl"
    log_conversation(upstream_url, path, "call get_weather", ids=False)
    import_traces(store, "long", "openai", openai_log.read([path]), renderer)
    calls = store.list_model_calls(store.list_rollouts()[0].id)
    after_first_prompt = (
        len(calls[-1].prompt_token_ids) + len(calls[-1].response_token_ids) - len(calls[0].prompt_token_ids)
    )
    report = check_run(store, "long", SampleConfig(max_response_tokens=10), decode=renderer.decode)
    assert report.truncated_rows == 1
    assert report.truncated_tokens == after_first_prompt - 10  # the row keeps 10 tokens after its prompt
