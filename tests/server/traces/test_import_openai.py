"""OpenAI chat-completions logs: a real OpenAI client's calls to a vLLM-shaped upstream, logged {request, response}."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from alight.schemas import RENDERED_FLAG
from alight_server.store.sql import SqlStore
from alight_server.traces.formats import openai_log
from alight_server.traces.importer import import_traces
from alight_server.traces.render import Renderer
from alight_server.trajectories.join import build_trajectory
from tests.server.traces.conftest import log_conversation


def _import(store: SqlStore, path: Path, renderer: Renderer | None, name: str = "logs") -> list[str]:
    report = import_traces(store, name, "openai", openai_log.read([path]), renderer)
    assert not report.errors, report.errors
    return sorted(r.id for r in store.list_rollouts() if r.id.startswith(f"{name}-"))


def test_a_logged_conversation_with_token_ids_imports_as_one_exact_trajectory(tmp_path, store, upstream_url):
    path = tmp_path / "calls.jsonl"
    logged = log_conversation(upstream_url, path, "call get_weather", ids=True)
    (rid,) = _import(store, path, renderer=None)  # exact calls need no renderer
    calls = [tc.call for tc in build_trajectory(store, rid).calls]
    assert [c.prompt_token_ids for c in calls] == [line["response"]["prompt_token_ids"] for line in logged]
    assert [c.response_token_ids for c in calls] == [line["response"]["choices"][0]["token_ids"] for line in logged]
    assert [c.response_logprobs for c in calls] == [
        [t["logprob"] for t in line["response"]["choices"][0]["logprobs"]["content"]] for line in logged
    ]
    assert all(not c.rendered for c in calls)
    assert calls[0].response is not None
    assert calls[0].response["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"


def test_a_text_only_log_is_rendered_with_the_policys_template_and_flagged(tmp_path, store, upstream_url, renderer):
    path = tmp_path / "calls.jsonl"
    log_conversation(upstream_url, path, "call get_weather", ids=False)
    (rid,) = _import(store, path, renderer)
    calls = [tc.call for tc in build_trajectory(store, rid).calls]
    assert [c.flags for c in calls] == [[RENDERED_FLAG], [RENDERED_FLAG]]
    assert all(c.response_logprobs == [] for c in calls)
    first = renderer.decode(calls[0].prompt_token_ids)
    assert (
        first.startswith("<|im_start|>system") and "get_weather" in first and first.endswith("<|im_start|>assistant\n")
    )
    assert renderer.decode(calls[0].response_token_ids).endswith("</tool_call><|im_end|>")
    # the second prompt continues the first call exactly: the rendered trajectory merges into one row
    assert calls[1].prompt_token_ids[: len(calls[0].prompt_token_ids) + len(calls[0].response_token_ids)] == (
        calls[0].prompt_token_ids + calls[0].response_token_ids
    )


def test_reimporting_the_same_log_stores_nothing_new(tmp_path, store, upstream_url, renderer):
    path = tmp_path / "calls.jsonl"
    log_conversation(upstream_url, path, "call get_weather", ids=False)
    log_conversation(upstream_url, path, "hello there", ids=False)
    first = _import(store, path, renderer)
    calls = {rid: store.list_model_calls(rid) for rid in first}
    report = import_traces(store, "logs", "openai", openai_log.read([path]), renderer)
    assert (report.sessions, report.new_rollouts) == (2, 0)
    assert _import(store, path, renderer) == first
    assert {rid: store.list_model_calls(rid) for rid in first} == calls


def test_conversations_interleaved_in_one_log_are_told_apart(tmp_path, store, upstream_url, renderer):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    log_conversation(upstream_url, a, "call get_weather", ids=False)
    log_conversation(upstream_url, b, "what is the weather", ids=False)
    lines_a, lines_b = a.read_text().splitlines(), b.read_text().splitlines()
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join([lines_a[0], lines_b[0], lines_a[1], lines_b[1]]) + "\n")
    sessions = openai_log.read([mixed]).sessions
    assert [[json.dumps(c.messages[0]) for c in s.calls] for s in sessions] == [
        [json.dumps(json.loads(lines_a[0])["request"]["messages"][0])] * 2,
        [json.dumps(json.loads(lines_b[0])["request"]["messages"][0])] * 2,
    ]


def test_a_task_key_groups_the_conversations_of_one_task(tmp_path, store, upstream_url, renderer):
    path = tmp_path / "calls.jsonl"
    for prompt in ("call get_weather", "what is the weather", "hello there"):
        log_conversation(upstream_url, path, prompt, ids=False)
    tasks = [{"id": "weather"}] * 4 + [{"id": "greeting"}] * 2  # a logger that wrote the task on every line
    lines = [json.loads(line) | {"task": task} for line, task in zip(path.read_text().splitlines(), tasks, strict=True)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    import_traces(store, "grouped", "openai", openai_log.read([path]), renderer, task_key="id")
    groups = Counter(r.group_id for r in store.list_rollouts())
    assert sorted(groups.values()) == [1, 2] and all(str(g).startswith("grouped-task-") for g in groups)
