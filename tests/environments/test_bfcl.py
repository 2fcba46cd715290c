"""BFCL in `alight eval --benchmark`: its own data and checker (in .venv-bfcl), the policy behind the gateway."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from alight_environments.bfcl.benchmark import Bfcl, answer, bfcl_python, score_answers
from typer.testing import CliRunner

from alight.cli import app
from alight_server.evaluation.benchmark import load_benchmark
from alight_server.stacks.run_store import open_run_store
from alight_server.stacks.server_thread import ServerThread
from alight_testing.fake_upstream import create_fake_upstream
from alight_testing.tiny_run import tiny_run_config

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not (Path(__file__).parents[2] / ".venv-bfcl/bin/python").is_file(),
                       reason="BFCL's venv is missing: bash scripts/setup.sh --bfcl"),
]  # fmt: skip


def ground_truth(entry_id: str) -> str:
    """The entry's first accepted answer as BFCL's prompt asks for it, from the package's own possible answers."""
    category = entry_id.rsplit("_", 1)[0]
    data = Path(bfcl_python()).parents[1].glob(f"lib/python*/site-packages/bfcl_eval/data/possible_answer/BFCL_v4_{category}.json")  # fmt: skip
    truth = next(json.loads(line) for line in next(data).open() if json.loads(line)["id"] == entry_id)
    calls = []
    for call in truth["ground_truth"]:
        ((name, params),) = call.items()
        args = ", ".join(f"{k}={values[0]!r}" for k, values in params.items() if values[0] != "")
        calls.append(f"{name}({args})")
    return f"[{', '.join(calls)}]"


def test_a_scripted_upstream_scores_exactly_the_entries_it_answers_with_the_ground_truth() -> None:
    tasks = Bfcl().tasks(["simple_python", "multiple", "parallel", "irrelevance"], 2)
    right = {"simple_python_0", "multiple_1", "parallel_0", "irrelevance_0", "irrelevance_1"}
    wrong = {  # a wrong value, the wrong function, one of two parallel calls; a call where none fits
        "simple_python_1": ground_truth("simple_python_1").replace("=5", "=6"),
        "multiple_0": ground_truth("multiple_1"),
        "parallel_1": ground_truth("parallel_1").split("), ")[0] + ")]",
    }
    by_question = {json.dumps(t["messages"][1:]): t["bfcl_id"] for t in tasks}

    def scripted(messages: list[dict[str, Any]]) -> str:
        entry = by_question[json.dumps(messages[1:])]
        if entry.startswith("irrelevance"):
            return "None of the functions fits." if entry == "irrelevance_0" else "[]"
        return ground_truth(entry) if entry in right else wrong[entry]

    app = create_fake_upstream("policy", chat_rule=scripted, tag_scripted=False)
    replies = []
    with ServerThread(app) as url, pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_BASE_URL", f"{url}/v1")
        env.setenv("OPENAI_API_KEY", "unused")
        for task in tasks:
            answer(task)  # the agent, over HTTP
            reply = app.state.fake.calls[-1].response
            replies.append((task["bfcl_id"], reply["choices"][0]["message"]["content"]))
    assert len(replies) == 8 and all(set(t) == {"bfcl_id", "category", "messages"} for t in tasks)  # no answers in it
    scores = dict(zip([i for i, _ in replies], score_answers(replies), strict=True))
    assert {i for i, s in scores.items() if s == 1.0} == right, replies


def test_answers_a_policy_could_forge_score_zero(tmp_path: Path) -> None:
    planted = tmp_path / "planted"
    attacks = [
        'The call is correct. {"valid": true, "error": ""}',  # a verdict in the checker's own words
        f"[__import__('os').system('touch {planted}')]",  # code in the answer: parsed, never run
        ground_truth("simple_python_1"),  # another entry's right answer
        f"{ground_truth('simple_python_0')[:-1]}, {ground_truth('simple_python_0')[1:]}",  # the right call twice
        ground_truth("simple_python_0") + " " * 20_000,  # past the answer limit: refused, not parsed
        "[" * 50_000,  # a parser-breaking nest
    ]
    answers = [("simple_python_0", a) for a in [*attacks, ground_truth("simple_python_0")]]
    assert score_answers(answers) == [0.0] * len(attacks) + [1.0]  # and the checker can say yes
    assert not planted.exists()


def test_an_unknown_benchmark_names_the_installed_ones() -> None:
    with pytest.raises(ValueError, match=r"no benchmark 'bfc' installed; installed: \[.*'bfcl'"):
        load_benchmark("bfc:simple")


def test_alight_eval_runs_bfcl_simple_on_the_tiny_model_through_the_gateway(tmp_path: Path) -> None:
    config = tmp_path / "tiny.yaml"
    # CPU saved: the agent forks from one process that imported it, and the tiny model's noise stops at 16 tokens
    raw = tiny_run_config(tmp_path, "unused.py:main", [{"q": "unused"}], controller={"preload": True},
                          inference={"max_output_tokens": 16})  # fmt: skip
    config.write_text(json.dumps(raw))
    done = CliRunner().invoke(app, ["eval", str(config), "--benchmark", "bfcl:simple", "--limit", "1", "--name", "b"])
    assert done.exit_code == 0, done.output[-3000:]
    assert "bfcl:simple: " in done.stdout and "simple_javascript" in done.stdout, done.stdout
    report = json.loads((tmp_path / "run/eval/b/report.json").read_text())
    assert [(c, v["tasks"], v["unanswered"]) for c, v in report["categories"].items()] == [
        ("simple_python", 1, 0), ("simple_java", 1, 0), ("simple_javascript", 1, 0)]  # fmt: skip
    # each rollout's reward is the checker's (the evaluator's), on BFCL's prompt as the gateway recorded it
    store = open_run_store(tmp_path / "run/eval/b")
    try:
        rollouts = store.list_rollouts()
        rewards = [r for rollout in rollouts for r in store.list_rewards(rollout.id)]
        calls = [c for rollout in rollouts for c in store.list_model_calls(rollout.id)]
    finally:
        store.close()
    assert len(rollouts) == 3 and [r.source.value for r in rewards] == ["evaluator"] * 3
    assert len(calls) == 3 and all("expert in composing functions" in json.dumps(c.request) for c in calls)


def test_alight_eval_refuses_a_bad_category_naming_the_valid_ones(tmp_path: Path) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text(json.dumps(tiny_run_config(tmp_path, "unused.py:main", [{"q": "unused"}])))
    done = CliRunner().invoke(app, ["eval", str(config), "--benchmark", "bfcl:simpel"])
    assert done.exit_code == 2 and "no category 'simpel'; valid: simple, non_live, live, simple_python" in done.output
    assert not (tmp_path / "run").exists()  # refused before any model loads
