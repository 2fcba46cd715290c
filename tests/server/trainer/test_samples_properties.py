"""Sample builder properties: merging never loses or duplicates a generated token, and
every trained token is one the model produced, carrying its recorded logprob."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from samples_fixtures import model_call, trajectory

from alight.schemas import ModelCall
from alight_server.trainer.step.samples import SampleConfig, build_samples

# A small vocabulary on purpose: accidental prefix matches between unrelated calls must be harmless.
tokens = st.lists(st.integers(0, 40), min_size=1, max_size=6)
BAD = {"http": {"status_code": 500}, "empty": {}, "flagged": {"flags": ["logprob_length_mismatch"]}}


@st.composite
def agent_runs(draw) -> tuple[list[ModelCall], Counter[str]]:
    """An agent session: conversations continued, rewritten, retried, resampled, and some failed calls.

    Returns the calls and how many were generated bad (by drop reason).
    """
    contexts: list[list[int]] = []  # what each conversation sends next
    last_prompts: list[list[int]] = []
    calls: list[ModelCall] = []
    bad: Counter[str] = Counter()
    for seq in range(draw(st.integers(1, 12))):
        action = draw(st.sampled_from(["new", "continue", "continue", "rewrite", "retry", "resample", "bad"]))
        if action == "new" or not contexts:
            contexts.append(draw(tokens))
            last_prompts.append([])
            action = "continue"
        i = draw(st.integers(0, len(contexts) - 1))
        if action == "rewrite":
            keep = draw(st.integers(0, len(contexts[i])))
            prompt = contexts[i][:keep] + draw(tokens)
        elif action in ("retry", "resample") and last_prompts[i]:
            prompt = last_prompts[i]
        else:
            prompt = contexts[i]
        if action == "bad":
            kind = draw(st.sampled_from(sorted(BAD)))
            bad[
                {"http": "http_500", "empty": "empty_response", "flagged": "flagged:logprob_length_mismatch"}[kind]
            ] += 1
            response = [] if kind == "empty" else draw(tokens)
            calls.append(model_call(seq, prompt, response, **BAD[kind]))
            continue  # the agent never saw an answer: its context is unchanged
        response = draw(tokens)
        calls.append(model_call(seq, prompt, response))
        if action == "resample" and last_prompts[i]:
            continue  # asked the same again but carried on from the earlier answer
        last_prompts[i] = prompt
        contexts[i] = prompt + response + draw(st.lists(st.integers(0, 40), max_size=3))
    return calls, bad


def trained_tokens(batch, r: int) -> list[tuple[int, float]]:
    mask = batch.loss_mask[r].bool()
    return list(zip(batch.input_ids[r][mask].tolist(), batch.old_logprobs[r][mask].tolist(), strict=True))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=agent_runs(), mode=st.sampled_from(["trajectory", "transition"]))
def test_every_generated_token_is_trained_exactly_once_with_its_logprob(run, mode):
    calls, bad = run
    batch, report = build_samples([trajectory(calls)], SampleConfig(mode=mode))
    by_seq = {c.seq: c for c in calls}

    used = [seq for row in batch.row_calls for seq in row]
    assert len(used) == len(set(used)), "a call's answer appears in two rows"
    assert report.calls == len(used) + sum(report.dropped_calls.values())
    assert {k: v for k, v in report.dropped_calls.items() if k != "retried"} == dict(bad)
    for seq in set(by_seq) - set(used):
        call = by_seq[seq]
        if call.status_code == 200 and call.response_token_ids and not call.flags:
            # A good call is left out only when the agent asked the same prompt again.
            assert any(c.seq != seq and c.prompt_token_ids == call.prompt_token_ids for c in calls)

    for r, row in enumerate(batch.row_calls):
        expected = [
            (token, logprob)
            for seq in row
            for token, logprob in zip(by_seq[seq].response_token_ids, by_seq[seq].response_logprobs, strict=True)
        ]
        got = trained_tokens(batch, r)
        assert [t for t, _ in got] == [t for t, _ in expected]
        for (_, want), (_, have) in zip(expected, got, strict=True):
            assert abs(want - have) < 1e-6  # float32 storage of the recorded logprob
        last = by_seq[row[-1]]
        n = int(batch.attention_mask[r].sum())
        assert batch.input_ids[r, :n].tolist() == last.prompt_token_ids + last.response_token_ids
        for seq in row:  # each merged answer sits right after its own prompt
            call = by_seq[seq]
            start = len(call.prompt_token_ids)
            assert batch.input_ids[r, start : start + len(call.response_token_ids)].tolist() == call.response_token_ids

    if mode == "transition":
        assert all(len(row) == 1 for row in batch.row_calls)
    else:
        assert report.rows == report.conversations + report.total_breaks
