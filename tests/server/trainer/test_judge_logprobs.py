"""The judge scored by logprobs (`judge.scoring: logprobs`): one digit token per answer, its expected value read
from the top alternatives. A scripted judge on loopback answers with the logprobs a test gives it; the real server
and store take the rewards; and alight's own inference server, serving SmolLM2-135M, is judged through too."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from judge_fixtures import BLOCK, finished_group, make_judging, phase_of

from alight.schemas import JUDGEMENT
from alight_server.inference.engine import InferenceEngine
from alight_server.inference.server import create_inference_app
from alight_server.stacks.server_thread import ServerThread

Top = list[tuple[str, float]]  # (token, probability)
RIGHT: Top = [("9", 0.6), (" 9", 0.1), ("8", 0.1), ("The", 0.2)]  # digits 0.8: (9 x 0.7 + 8 x 0.1) / 0.8 / 9
WRONG: Top = [("1", 0.5), ("0", 0.4), ("<<", 0.1)]  # (1 x 0.5) / 0.9 / 9


class DigitJudge:
    """An OpenAI-compatible judge whose one token's top alternatives are `rule(the scored answer's text)`."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.rule = lambda answer: RIGHT if "42" in answer else WRONG
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self.chat)

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(body)
        label = body["messages"][-1]["content"].rsplit("score of answer ", 1)[1].split(",")[0]
        answer = next(text for _, lab, text in BLOCK.findall(body["messages"][-1]["content"]) if lab == label)
        top = [{"token": t, "logprob": math.log(p), "bytes": None} for t, p in self.rule(answer)]
        first = {**top[0], "top_logprobs": top}
        message = {"role": "assistant", "content": top[0]["token"]}
        return {"id": "j", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "message": message, "logprobs": {"content": [first]}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 1, "total_tokens": 101}}  # fmt: skip


@pytest.fixture
def digit_judge(scripted_judge: Any) -> Iterator[Any]:
    """The scripted judge's key and URL shape, answered by a DigitJudge."""
    judge = DigitJudge()
    with ServerThread(judge.app) as url:
        scripted_judge.url, scripted_judge.digits = f"{url}/v1", judge
        yield scripted_judge


def test_a_logprobs_judgement_is_the_expected_digit_of_one_token(client, live_server, digit_judge):
    group = finished_group(client, live_server, "g", ["It is 42.", "It is 41."])
    judged = make_judging(client, digit_judge, scoring="logprobs").judge_phase(phase_of(client, group))

    right, wrong = (9 * 0.7 + 8 * 0.1) / 0.8 / 9, 1 * 0.5 / 0.9 / 9
    assert [t.final_reward for t in judged.trajectories] == pytest.approx([right, wrong])
    request = digit_judge.digits.requests[0]
    assert (request["max_tokens"], request["logprobs"], request["top_logprobs"]) == (1, True, 20)
    record = client.list_events("g-k0", kind=JUDGEMENT)[0].payload
    assert record["digits"] == pytest.approx({"8": 0.1, "9": 0.7}) and record["scores"] == {
        "g-k0": pytest.approx(right)
    }


def test_digits_holding_too_little_of_the_first_token_are_no_score(client, live_server, digit_judge):
    digit_judge.digits.rule = lambda answer: [("The", 0.6), ("9", 0.3), ("<<", 0.1)]
    group = finished_group(client, live_server, "g", ["It is 42."])
    judged = make_judging(client, digit_judge, scoring="logprobs").judge_phase(phase_of(client, group))

    assert judged.infra == 1 and client.trajectory("g-k0").final_reward is None  # never a zero
    assert "the digits hold 0.300" in client.list_events("g-k0", kind=JUDGEMENT)[0].payload["failed"]


def test_group_mode_by_logprobs_asks_once_per_rollout_with_the_whole_group_in_view(client, live_server, digit_judge):
    group = finished_group(client, live_server, "g", ["41", "The answer is 42", "40"])
    judged = make_judging(client, digit_judge, scoring="logprobs", mode="group").judge_phase(phase_of(client, group))

    requests = digit_judge.digits.requests
    assert len(requests) == 3
    asked = [r["messages"][-1]["content"].rsplit("score of answer ", 1)[1].split(",")[0] for r in requests]
    shown = [[lab for _, lab, _ in BLOCK.findall(r["messages"][-1]["content"])][1:] for r in requests]
    assert all(len(labels) == 3 for labels in shown)  # every call shows the three answers...
    assert sorted(labels.index(a) for a, labels in zip(asked, shown, strict=True)) == [0, 1, 2]  # ...scores one
    assert [t.final_reward for t in judged.trajectories] == pytest.approx([0.5 / 0.9 / 9, 7.1 / 0.8 / 9, 0.5 / 0.9 / 9])


def test_replace_makes_the_judges_score_the_whole_final_reward(client, live_server, digit_judge):
    group = finished_group(client, live_server, "g", ["42", "7"], rewards=[0.0, 1.0])
    judging = make_judging(client, digit_judge, scoring="logprobs", replace=True, weight=2.0)
    judged = judging.judge_phase(phase_of(client, group))

    assert [t.final_reward for t in judged.trajectories] == pytest.approx([2 * (7.1 / 0.8 / 9), 2 * (0.5 / 0.9 / 9)])


@contextlib.contextmanager
def served(model: str) -> Iterator[str]:
    """`model` on alight's own inference server, under the name and key the judge fixtures send."""
    with (
        InferenceEngine.from_model_name(model, device="cpu", model_name="judge") as engine,
        ServerThread(create_inference_app(engine, api_key="judge-key", admin_key="admin")) as url,
    ):
        yield f"{url}/v1"


@pytest.mark.slow
def test_smollm2_on_alights_inference_server_answers_a_logprobs_judge_with_a_score(client, live_server, scripted_judge):
    pytest.importorskip("gguf")
    # One answer, one call: each is a ~640-token prefill on the CPU (a second answer doubled the cost and showed
    # nothing new; the scripted judge's tests cover how several answers' scores are told apart).
    with served("smollm2-135m") as scripted_judge.url:
        group = finished_group(client, live_server, "g", ["It is 42."])
        judging = make_judging(client, scripted_judge, scoring="logprobs", timeout_s=120)  # a loaded 2-core CPU
        judged = judging.judge_phase(phase_of(client, group))

    (trajectory,) = judged.trajectories
    assert judged.infra == 0  # a score, never a format failure: its digits hold over half the first token
    digits = client.list_events(trajectory.rollout_id, kind=JUDGEMENT)[0].payload["digits"]
    assert trajectory.final_reward is not None and 0.0 <= trajectory.final_reward <= 1.0
    assert sum(digits.values()) >= 0.5 and set(digits) <= set("0123456789")


def test_a_model_that_puts_no_digit_in_its_top_20_is_refused_not_scored(client, live_server, digit_judge):
    digit_judge.digits.rule = lambda answer: [("The", 0.6), ("<<", 0.3), ("A", 0.1)]  # as a random model answers
    group = finished_group(client, live_server, "g", ["It is 42."])
    judging = make_judging(client, digit_judge, scoring="logprobs", min_digit_mass=0.0)
    judged = judging.judge_phase(phase_of(client, group))

    assert judged.infra == 1 and client.trajectory("g-k0").final_reward is None
    assert "the digits hold 0.000" in client.list_events("g-k0", kind=JUDGEMENT)[0].payload["failed"]
