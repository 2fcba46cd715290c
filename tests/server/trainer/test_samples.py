"""Sample builder on hand-built trajectories: exact ids, masks, logprobs and counts."""

from __future__ import annotations

import pytest
import torch
from samples_fixtures import chat, logprobs_for, model_call, step_reward, trajectory

from alight.schemas import ApiFlavour, FailureKind, TrajectoryCall
from alight_server.trainer.step.samples import SampleConfig, build_samples

SYSTEM = ("system", "You are a calculator agent.")
USER = ("user", "What is 2+3?")


def tool_use_calls():
    """Three turns: answer with a tool call, read the tool result, answer again."""
    first = model_call(0, [1, 2, 3], [10, 11], messages=chat(SYSTEM, USER), reply="call add")
    second = model_call(
        1,
        [1, 2, 3, 10, 11, 20, 21],
        [12, 13],
        messages=[*chat(SYSTEM, USER), {"role": "assistant", "content": "call add"}, {"role": "tool", "content": "5"}],
        reply="5",
    )
    third = model_call(2, [1, 2, 3, 10, 11, 20, 21, 12, 13, 22], [14], messages=[], reply="done")
    return [first, second, third]


def rows_of(batch):
    """Real tokens, loss mask and logprobs of each row as plain lists."""
    out = []
    for r in range(batch.num_rows):
        n = int(batch.attention_mask[r].sum())
        out.append(
            (
                batch.input_ids[r, :n].tolist(),
                batch.loss_mask[r, :n].int().tolist(),
                [round(x, 4) for x in batch.old_logprobs[r, :n].tolist()],
            )
        )
    return out


def test_multi_turn_tool_use_merges_into_one_row_with_tool_results_masked():
    batch, report = build_samples([trajectory(tool_use_calls())])
    [(ids, mask, logprobs)] = rows_of(batch)
    assert ids == [1, 2, 3, 10, 11, 20, 21, 12, 13, 22, 14]
    assert mask == [0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 1]
    assert logprobs == [0, 0, 0, 0.0, -0.01, 0, 0, -1.0, -1.01, 0, -2.0]
    assert batch.row_calls == [(0, 1, 2)]
    assert (report.rows, report.conversations, report.total_breaks) == (1, 1, 0)
    assert (report.tokens, report.trained_tokens, report.calls_used) == (11, 5, 3)


def test_transition_mode_keeps_every_call_as_its_own_row():
    batch, report = build_samples([trajectory(tool_use_calls())], SampleConfig(mode="transition"))
    assert [ids for ids, _, _ in rows_of(batch)] == [
        [1, 2, 3, 10, 11],
        [1, 2, 3, 10, 11, 20, 21, 12, 13],
        [1, 2, 3, 10, 11, 20, 21, 12, 13, 22, 14],
    ]
    assert [mask for _, mask, _ in rows_of(batch)][1] == [0, 0, 0, 0, 0, 0, 0, 1, 1]
    assert batch.input_ids.shape == (3, 11)
    assert batch.input_ids[0, 5:].tolist() == [0] * 6  # right padding with pad_token_id
    assert batch.attention_mask.sum(1).tolist() == [5, 9, 11]
    assert (report.rows, report.trained_tokens) == (3, 5)


def test_summarised_history_starts_a_new_row_counted_as_history_rewrite():
    first, second, _ = tool_use_calls()
    summary = model_call(
        2,
        [1, 2, 3, 30, 31],  # the agent replaced the tool exchange by a summary
        [15],
        messages=[*chat(SYSTEM, USER), {"role": "user", "content": "Summary: add returned 5"}],
    )
    batch, report = build_samples([trajectory([first, second, summary])])
    assert [ids for ids, _, _ in rows_of(batch)] == [[1, 2, 3, 10, 11, 20, 21, 12, 13], [1, 2, 3, 30, 31, 15]]
    assert report.breaks == {"history_rewrite": 1}
    [example] = report.break_examples
    assert (example.call_seq, example.previous_call_seq, example.position) == (2, 1, 3)
    assert example.row_ids == [10, 11, 20, 21, 12, 13]
    assert example.prompt_ids == [30, 31]
    assert report.rows == report.conversations + report.total_breaks
    assert report.metrics()["samples/breaks/history_rewrite"] == 1.0
    assert "history_rewrite at r1/1 call 2 (after call 1), token 3" in report.summary()


def test_same_messages_rendered_to_other_ids_is_template_drift():
    first = model_call(0, [1, 2, 3], [10, 11, 12], messages=chat(SYSTEM, USER), reply="<think>x</think>ok")
    # The chat template dropped the earlier turn's reasoning tokens (10, 11): same conversation, other ids.
    second = model_call(
        1,
        [1, 2, 3, 12, 20],
        [13],
        messages=[*chat(SYSTEM, USER), {"role": "assistant", "content": "<think>x</think>ok"}],
    )
    _, report = build_samples([trajectory([first, second])])
    assert report.breaks == {"template_drift": 1}
    assert report.break_examples[0].position == 3


def test_responses_flavour_items_are_compared_as_messages():
    call_item = {"type": "function_call", "name": "add", "arguments": '{"a": 2, "b": 3}', "call_id": "c1"}
    user = {"role": "user", "content": "2+3?"}
    first = model_call(
        0,
        [1, 2],
        [10, 11],
        flavour=ApiFlavour.RESPONSES,
        request={"instructions": "You add.", "input": [user]},
        response_body={"output": [{**call_item, "id": "fc_1", "status": "completed"}]},
    )
    output = {"type": "function_call_output", "call_id": "c1", "output": "5"}
    second = model_call(
        1,
        [1, 2, 12, 20],
        [13],
        flavour=ApiFlavour.RESPONSES,
        request={"instructions": "You add.", "input": [user, call_item, output]},
    )
    _, report = build_samples([trajectory([first, second])])
    assert report.breaks == {"template_drift": 1}


def test_messages_flavour_with_an_edited_turn_is_history_rewrite():
    request = {"system": "You add.", "messages": [{"role": "user", "content": [{"type": "text", "text": "2+3?"}]}]}
    first = model_call(
        0,
        [1, 2],
        [10],
        flavour=ApiFlavour.MESSAGES,
        request=request,
        response_body={"content": [{"type": "tool_use", "id": "t1", "name": "add", "input": {"a": 2, "b": 3}}]},
    )
    edited = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "add", "input": {"a": 3}}]}
    second = model_call(
        1,
        [1, 2, 11],
        [12],
        flavour=ApiFlavour.MESSAGES,
        request={**request, "messages": [*request["messages"], edited]},
    )
    _, report = build_samples([trajectory([first, second])])
    assert report.breaks == {"history_rewrite": 1}


VOCAB = {1: "<s>", 2: "Q:", 10: "Hel", 11: "lo", 12: "Hello", 20: "\n", 21: "A:", 30: "Bye"}


def decode(ids):
    return "".join(VOCAB[i] for i in ids)


def test_same_text_with_other_ids_is_retokenization_when_a_decoder_is_given():
    first = model_call(0, [1, 2], [10, 11], messages=chat(USER), reply="Hello")
    second = model_call(1, [1, 2, 12, 20, 21], [30], messages=[*chat(USER), {"role": "assistant", "content": "Hello"}])
    _, with_decoder = build_samples([trajectory([first, second])], decode=decode)
    assert with_decoder.breaks == {"retokenization": 1}
    # Without a decoder the messages still match, so the break reads as template drift (documented).
    _, without = build_samples([trajectory([first, second])])
    assert without.breaks == {"template_drift": 1}


def test_completions_flavour_detects_retokenization_from_prompt_text():
    first = model_call(
        0,
        [1, 2],
        [10, 11],
        flavour=ApiFlavour.COMPLETIONS,
        request={"prompt": "Q:"},
        response_body={"choices": [{"text": "Hello"}]},
    )
    second = model_call(
        1, [1, 2, 12, 20], [30], flavour=ApiFlavour.COMPLETIONS, request={"prompt": "Q:Hello\n"}, response_body={}
    )
    _, report = build_samples([trajectory([first, second])])
    assert report.breaks == {"retokenization": 1}


def test_calls_without_any_text_break_for_an_unknown_cause():
    first = model_call(0, [1, 2], [10], request={})
    second = model_call(1, [1, 5], [11], request={})
    _, report = build_samples([trajectory([first, second])])
    assert report.breaks == {"unknown": 1}


def interleaved_sub_agent():
    planner = chat(("system", "You plan."), USER)
    helper = chat(("system", "You compute."), ("user", "2+3"))
    a1 = model_call(0, [1, 2], [10], messages=planner)
    b1 = model_call(1, [5, 6], [50], messages=helper)
    a2 = model_call(2, [1, 2, 10, 20], [11], messages=[])
    b2 = model_call(3, [5, 6, 50, 60], [51], messages=[])
    a3 = model_call(4, [1, 2, 10, 20, 11, 21], [12], messages=[])
    return [
        TrajectoryCall(call=c, agent_name=name, span_path=["alight.rollout", f"invoke_agent {name}"])
        for c, name in [(a1, "planner"), (b1, "calculator"), (a2, "planner"), (b2, "calculator"), (a3, "planner")]
    ]


def test_sub_agent_interleaving_calls_keeps_each_agent_in_its_own_row():
    batch, report = build_samples([trajectory(interleaved_sub_agent())])
    assert [ids for ids, _, _ in rows_of(batch)] == [[1, 2, 10, 20, 11, 21, 12], [5, 6, 50, 60, 51]]
    assert batch.row_calls == [(0, 2, 4), (1, 3)]
    assert (report.conversations, report.total_breaks) == (2, 0)


def test_agent_filter_trains_only_the_named_agent():
    batch, report = build_samples([trajectory(interleaved_sub_agent())], SampleConfig(agents=["calculator"]))
    assert batch.row_calls == [(1, 3)]
    assert report.dropped_calls == {"agent_filter": 3}


def test_side_task_calls_are_left_out_by_the_model_name_the_agent_asked_for():
    main = {"model": "claude-opus-4-8", "messages": []}
    side = {"model": "claude-haiku-4-5", "messages": []}  # Claude Code titling the session
    calls = [
        TrajectoryCall(call=model_call(0, [1, 2], [10], request=main)),
        TrajectoryCall(call=model_call(1, [7, 8], [70], request=side)),
        TrajectoryCall(call=model_call(2, [1, 2, 10, 20], [11], request=main)),
    ]
    batch, report = build_samples([trajectory(calls)], SampleConfig(exclude_models=["*haiku*"]))
    [(ids, mask, _)] = rows_of(batch)
    assert ids == [1, 2, 10, 20, 11] and mask == [0, 0, 1, 0, 1]
    assert report.dropped_calls == {"model_filter": 1}


def test_filtered_agent_in_a_shared_conversation_becomes_context():
    a1 = TrajectoryCall(call=model_call(0, [1, 2], [10]), agent_name="triage")
    b1 = TrajectoryCall(call=model_call(1, [1, 2, 10, 20], [30, 31]), agent_name="billing")  # handoff
    a2 = TrajectoryCall(call=model_call(2, [1, 2, 10, 20, 30, 31, 21], [11]), span_path=["invoke_agent triage"])
    batch, _ = build_samples([trajectory([a1, b1, a2])], SampleConfig(agents=["triage"]))
    [(ids, mask, _)] = rows_of(batch)
    assert ids == [1, 2, 10, 20, 30, 31, 21, 11]
    assert mask == [0, 0, 1, 0, 0, 0, 0, 1]


def test_a_failed_call_retried_by_the_agent_is_dropped_and_the_retry_merges():
    first, second, third = tool_use_calls()
    failed = model_call(1, second.prompt_token_ids, [], status_code=500, error="upstream 500")
    retry = second.model_copy(update={"seq": 2, "response_logprobs": logprobs_for(2, 2)})
    last = third.model_copy(update={"seq": 3, "response_logprobs": logprobs_for(3, 1)})
    batch, report = build_samples([trajectory([first, failed, retry, last])])
    assert batch.row_calls == [(0, 2, 3)]
    assert rows_of(batch)[0][2][7:9] == [-2.0, -2.01]  # the retry's logprobs, not the failed call's
    assert report.dropped_calls == {"http_500": 1}


def test_a_call_asked_again_with_the_same_prompt_replaces_the_unused_answer():
    first, second, third = tool_use_calls()
    lost = model_call(1, second.prompt_token_ids, [40, 41, 42])  # the client timed out on this answer
    retry = second.model_copy(update={"seq": 2, "response_logprobs": logprobs_for(2, 2)})
    last = third.model_copy(update={"seq": 3, "response_logprobs": logprobs_for(3, 1)})
    batch, report = build_samples([trajectory([first, lost, retry, last])])
    assert batch.row_calls == [(0, 2, 3)]
    assert 40 not in batch.input_ids[0].tolist()
    assert report.dropped_calls == {"retried": 1}
    assert report.calls == report.calls_used + sum(report.dropped_calls.values())


def test_when_the_agent_continues_from_the_first_of_two_answers_the_second_is_dropped():
    first, second, third = tool_use_calls()
    other = model_call(2, second.prompt_token_ids, [40, 41, 42])  # sampled again, then not used
    last = third.model_copy(update={"seq": 3, "response_logprobs": logprobs_for(3, 1)})
    batch, report = build_samples([trajectory([first, second, other, last])])
    assert batch.row_calls == [(0, 1, 3)]
    assert rows_of(batch)[0][0] == [1, 2, 3, 10, 11, 20, 21, 12, 13, 22, 14]
    assert (report.dropped_calls, report.total_breaks) == ({"retried": 1}, 0)


def test_empty_flagged_and_mismatched_calls_are_dropped_with_their_reason():
    calls = [
        model_call(0, [1, 2], [10]),
        model_call(1, [1, 2, 10, 20], []),
        model_call(2, [1, 2, 10, 20], [11, 12], logprobs=[-0.1], flags=["logprob_length_mismatch"]),
        model_call(3, [1, 2, 10, 20], [11, 12], logprobs=[-0.1]),
        model_call(4, [1, 2, 10, 20], [13], error="tool parser failed"),
        model_call(5, [], [13]),
        model_call(6, [1, 2, 10, 20, 11, 12, 21], [14]),
    ]
    batch, report = build_samples([trajectory(calls)])
    assert report.dropped_calls == {
        "empty_response": 1,
        "flagged:logprob_length_mismatch": 1,
        "logprob_length_mismatch": 1,
        "error": 1,
        "empty_prompt": 1,
    }
    [(ids, mask, _)] = rows_of(batch)
    assert ids == [1, 2, 10, 20, 11, 12, 21, 14]
    assert mask == [0, 0, 1, 0, 0, 0, 0, 1]  # the flagged answer (11, 12) stays as context only


def test_row_over_the_response_limit_is_truncated_with_accounting():
    batch, report = build_samples([trajectory(tool_use_calls())], SampleConfig(max_response_tokens=5))
    [(ids, mask, logprobs)] = rows_of(batch)
    assert ids == [1, 2, 3, 10, 11, 20, 21, 12]
    assert mask == [0, 0, 0, 1, 1, 0, 0, 1]
    assert logprobs[-1] == -1.0
    assert batch.row_calls == [(0, 1)]
    assert (report.truncated_rows, report.truncated_tokens, report.truncated_trained_tokens) == (1, 3, 2)
    assert report.dropped_calls == {"truncated_away": 1}


def test_row_over_a_limit_is_dropped_with_accounting():
    config = SampleConfig(mode="transition", max_prompt_tokens=6)
    batch, report = build_samples([trajectory(tool_use_calls())], config)
    assert batch.row_calls == [(0,)]
    assert report.dropped_rows == {"prompt_too_long": 2}
    assert report.dropped_row_tokens == 9 + 11
    assert report.dropped_calls == {"row_prompt_too_long": 2}
    _, report = build_samples([trajectory(tool_use_calls())], SampleConfig(max_response_tokens=5, overlong="drop"))
    assert (report.rows, report.dropped_rows, report.dropped_row_tokens) == (0, {"response_too_long": 1}, 11)


def test_rollouts_index_groups_and_rewards_and_keep_rowless_rollouts_for_group_statistics():
    trajectories = [
        trajectory(tool_use_calls(), rollout_id="a", group_id="task-1", reward=1.0),
        trajectory([model_call(0, [1], [], rollout_id="b")], rollout_id="b", group_id="task-1", reward=0.0),
        trajectory([model_call(0, [7], [8], rollout_id="c")], rollout_id="c", group_id=None, reward=0.5),
        trajectory([model_call(0, [7], [8], rollout_id="d")], rollout_id="d", reward=None),
        trajectory([model_call(0, [7], [8], rollout_id="e")], rollout_id="e", failure_kind=FailureKind.INFRA),
        trajectory([model_call(0, [7], [8], rollout_id="f")], rollout_id="f", reward=float("nan")),
    ]
    batch, report = build_samples(trajectories)
    assert batch.rollout_ids == ["a", "b", "c"]
    assert batch.group_ids == ["task-1", "rollout:c"]
    assert batch.rollout_group.tolist() == [0, 0, 1]
    assert batch.rollout_reward.tolist() == [1.0, 0.0, 0.5]
    assert batch.row_rollout.tolist() == [0, 2]
    assert batch.row_group.tolist() == [0, 1]
    assert batch.row_reward.tolist() == [1.0, 0.5]
    assert report.dropped_rollouts == {"no_reward": 1, "infra_failure": 1, "non_finite_reward": 1}
    assert report.calls == report.calls_used + sum(report.dropped_calls.values())


def test_the_same_rollout_twice_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"rollout 'r1' appears twice \(attempts 1 and 1\)"):
        build_samples([trajectory(tool_use_calls()), trajectory(tool_use_calls())])


def test_step_rewards_become_rewards_to_go_on_the_tokens_of_their_call():
    first, second, third = tool_use_calls()
    calls = [
        TrajectoryCall(call=first, rewards=[step_reward(first, 0.5)]),
        TrajectoryCall(call=second),
        TrajectoryCall(call=third, rewards=[step_reward(third, 0.25)]),
    ]
    batch, _ = build_samples([trajectory(calls)])
    assert batch.step_returns[0].tolist() == [0, 0, 0, 0.75, 0.75, 0, 0, 0.25, 0.25, 0, 0.25]


def test_row_policy_version_is_the_oldest_among_its_calls():
    first, second, third = tool_use_calls()
    calls = [first.model_copy(update={"policy_version": 3}), second.model_copy(update={"policy_version": 4}), third]
    batch, _ = build_samples([trajectory(calls)], SampleConfig(mode="transition"))
    assert batch.row_policy_version.tolist() == [3, 4, 0]
    unknown = [c.model_copy(update={"policy_version": None}) for c in calls]
    batch, _ = build_samples([trajectory(unknown)])
    assert batch.row_policy_version.tolist() == [-1]


def test_select_takes_rows_and_keeps_the_rollout_tables():
    batch, _ = build_samples([trajectory(tool_use_calls())], SampleConfig(mode="transition"))
    micro = batch.select([2, 0])
    assert micro.row_calls == [(2,), (0,)]
    assert torch.equal(micro.input_ids, batch.input_ids[[2, 0]])
    assert micro.rollout_ids == batch.rollout_ids
    assert micro.to("cpu").loss_mask.sum().item() == 3


def test_an_empty_input_gives_an_empty_batch():
    batch, report = build_samples([])
    assert batch.input_ids.shape == (0, 0)
    assert report.rows == 0


def test_bad_config_values_are_named():
    with pytest.raises(ValueError, match=r"max_response_tokens\n  Input should be greater than or equal to 1"):
        SampleConfig(max_response_tokens=0)
    with pytest.raises(ValueError, match=r"mode\n  Input should be 'trajectory' or 'transition'"):
        SampleConfig(mode="turns")  # type: ignore[arg-type]
