"""A call's fidelity survives `alight data export` and `alight data import --format alight`."""

from __future__ import annotations

import json

from alight_server.commands.export_format import FORMAT, VERSION, call_line
from alight_server.traces.formats import alight_export, openai_log
from alight_server.traces.importer import import_traces
from tests.server.traces.conftest import log_conversation


def test_calls_imported_as_text_export_as_rendered_and_import_back_as_rendered(tmp_path, store, upstream_url, renderer):
    log = tmp_path / "text.jsonl"
    log_conversation(upstream_url, log, "call get_weather", ids=False)
    assert import_traces(store, "text", "openai", openai_log.read([log]), renderer).calls["rendered"] == 2
    (rollout,) = store.list_rollouts()
    calls = [call_line(call) for call in store.list_model_calls(rollout.id)]
    assert [line["fidelity"] for line in calls] == ["rendered", "rendered"]
    export = tmp_path / "export.jsonl"
    header = {"format": FORMAT, "version": VERSION, "run_id": "r", "redacted": False}
    lines = [header, {"kind": "rollout", "rollout_id": rollout.id, "task": rollout.task}, *calls]
    export.write_text("".join(json.dumps(line) + "\n" for line in lines))
    # Read back as text again, not as exact calls holding rendered ids and no recorded logprobs.
    report = import_traces(store, "again", "alight", alight_export.read([export]), renderer)
    assert (report.calls["exact"], report.calls["rendered"]) == (0, 2)
