"""Bad input: each record that cannot be imported gets a message naming it and what is wrong; the rest is imported."""

from __future__ import annotations

import gzip
import json

from alight_server.traces.check import check_run
from alight_server.traces.formats import alight_export, openai_log
from alight_server.traces.importer import import_traces
from tests.server.traces.conftest import log_conversation


def test_a_truncated_log_reports_its_cut_line_and_imports_the_complete_ones(tmp_path, store, upstream_url, renderer):
    whole = tmp_path / "whole.jsonl"
    log_conversation(upstream_url, whole, "call get_weather", ids=False)
    text = whole.read_text()
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(text[: len(text) - 40].encode()))  # the second line loses its end
    parsed = openai_log.read([cut])
    (error,) = parsed.errors
    assert error.where == "cut.jsonl.gz:2" and "truncated" in error.message
    report = import_traces(store, "cut", "openai", parsed, renderer)
    assert (report.sessions, report.calls["rendered"]) == (1, 1)


def test_a_gzip_file_cut_short_still_yields_what_arrived(tmp_path, upstream_url):
    whole = tmp_path / "whole.jsonl"
    log_conversation(upstream_url, whole, "call get_weather", ids=False)
    packed = gzip.compress(whole.read_bytes())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(packed[:-8])  # the gzip trailer (checksum and length) never arrived: gzip.decompress refuses
    parsed = openai_log.read([cut])
    assert parsed.errors == [] and [len(s.calls) for s in parsed.sessions] == [2]


def test_an_export_of_an_unknown_version_is_refused_by_name(tmp_path):
    path = tmp_path / "future.jsonl"
    path.write_text(json.dumps({"format": "alight-export", "version": 7, "run_id": "r"}) + "\n")
    (error,) = alight_export.read([path]).errors
    assert error.where == "future.jsonl:1" and "version 7 is unknown" in error.message


def test_a_session_with_tool_calls_the_template_cannot_render_is_reported_and_the_rest_imported(
    tmp_path, store, upstream_url, renderer
):
    path = tmp_path / "calls.jsonl"
    log_conversation(upstream_url, path, "call get_weather", ids=False)
    # An OpenAI custom tool call (free-form input, no function): the policy's Hermes template has no form for it.
    custom = {"id": "ct1", "type": "custom", "custom": {"name": "apply_patch", "input": "*** Begin Patch"}}
    line = {
        "request": {"model": "policy", "messages": [{"role": "user", "content": "patch it"}]},
        "response": {"choices": [{"index": 0, "finish_reason": "tool_calls",
                                  "message": {"role": "assistant", "content": None, "tool_calls": [custom]}}]},
    }  # fmt: skip
    with path.open("a") as f:
        f.write(json.dumps(line) + "\n")
    report = import_traces(store, "mixed", "openai", openai_log.read([path]), renderer)
    assert (report.sessions, report.calls["rendered"], report.calls["left_out"]) == (2, 2, 1)
    (error,) = report.errors
    assert error.where.endswith("call 0") and "cannot render this call" in error.message and "name" in error.message
    check = check_run(store, "mixed", decode=renderer.decode)
    left = [t for t in check.trajectories if t.left_out]
    assert len(left) == 1 and left[0].calls == 0 and "cannot render" in left[0].unrendered[0]


def test_a_forged_exact_call_with_a_negative_id_or_a_positive_logprob_is_refused(tmp_path, store, upstream_url):
    path = tmp_path / "calls.jsonl"
    log_conversation(upstream_url, path, "call get_weather", ids=True)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[0]["response"]["choices"][0]["logprobs"]["content"][0]["logprob"] = 0.7  # a "probability" above 1
    lines[1]["response"]["choices"][0]["token_ids"][0] = -3
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = import_traces(store, "forged", "openai", openai_log.read([path]), renderer=None)
    assert (report.calls["left_out"], report.calls["exact"]) == (2, 0)
    assert [e.where.rsplit(" ", 1)[-1] for e in report.errors] == ["0", "1"]
    assert "logprob is above 0" in report.errors[0].message
    assert "token id -3 is outside the vocabulary" in report.errors[1].message


def test_recorded_ids_of_another_models_vocabulary_are_refused_for_this_policy(tmp_path, store, upstream_url, renderer):
    path = tmp_path / "calls.jsonl"
    log_conversation(upstream_url, path, "call get_weather", ids=True)  # the double's own tokenizer: ids past tiny's
    report = import_traces(store, "other", "openai", openai_log.read([path]), renderer)
    assert (report.calls["left_out"], report.calls["exact"]) == (2, 0)
    assert all(f"outside the vocabulary of tiny ({renderer.vocab_size} tokens)" in e.message for e in report.errors)


def test_a_session_with_a_non_finite_reward_is_reported_and_the_others_imported(tmp_path, store, renderer):
    from alight_server.traces.model import Parsed, TraceCall, TraceReward, TraceSession

    def session(key: str, reward: float) -> TraceSession:
        call = TraceCall(messages=[{"role": "user", "content": key}], reply={"role": "assistant", "content": "ok"})
        return TraceSession(key=key, calls=[call], rewards=[TraceReward(reward)])

    parsed = Parsed(sessions=[session("good", 1.0), session("bad", float("nan"))])
    report = import_traces(store, "nan", "otel", parsed, renderer)
    assert report.sessions == 1 and [r.metadata["offline"]["source"] for r in store.list_rollouts()] == ["good"]
    (error,) = report.errors
    assert error.where == "session bad"
    assert (
        error.message == "not imported: RewardCreate.value: Value error, reward value must be a finite number, got nan"
    )
