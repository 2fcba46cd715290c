"""The copies people read: a trajectory with its content redacted, a token view row with marked blocks."""

from __future__ import annotations

import bisect
import itertools
from typing import Any

from alight.schemas import CallOutput, Rollout, Run, Trajectory, TrajectoryCall
from alight_server.redaction.redactor import Redactor, mark

# In a redacted copy's `ModelCall.flags`: something in this call was hidden, and its token ids (which
# decode straight back to the hidden text) are left out of the copy.
REDACTED_FLAG = "redacted"


def redact_rollout(redactor: Redactor, rollout: Rollout) -> Rollout:
    """The rollout with its task and its attempts' messages (which can quote what failed) redacted."""
    attempts = [
        a.model_copy(update={"message": redactor.redact(a.message)}) if a.message else a for a in rollout.attempts
    ]
    return rollout.model_copy(update={"task": redactor.redact_json(rollout.task), "attempts": attempts})


def redact_run(redactor: Redactor | None, run: Run) -> Run:
    """The run with its config redacted (a config can carry a URL's credentials); as it is when no redactor."""
    return run.model_copy(update={"config": redactor.redact_json(run.config)}) if redactor is not None else run


def redact_call(redactor: Redactor, joined: TrajectoryCall) -> TrajectoryCall:
    call = joined.call
    content = {"request": call.request, "response": call.response, "error": call.error}
    hidden = {name: redactor.redact_json(value) for name, value in content.items()}
    output = CallOutput.model_validate(redactor.redact_json(joined.output.model_dump(mode="json")))
    update: dict[str, Any] = hidden
    if hidden != content or output != joined.output:
        update |= {
            "prompt_token_ids": [],
            "response_token_ids": [],
            "response_logprobs": [],
            "extra_choices": [],
            "flags": [*call.flags, REDACTED_FLAG],
        }
    return joined.model_copy(update={"call": call.model_copy(update=update), "output": output})


def redact_trajectory(redactor: Redactor, trajectory: Trajectory) -> Trajectory:
    """Every piece of content (bodies, answers, errors, tool arguments and results, the task) redacted.

    Identifiers, statuses, timings and rewards stay as they are: they are not content, and a trace id
    would otherwise read as a high-entropy token. A call with anything hidden loses its token ids.
    """
    tools = [
        span.model_copy(
            update={"arguments": redactor.redact_json(span.arguments), "result": redactor.redact_json(span.result)}
        )
        for span in trajectory.tool_spans
    ]
    return trajectory.model_copy(
        update={
            "calls": [redact_call(redactor, joined) for joined in trajectory.calls],
            "tool_spans": tools,
            "task": redactor.redact_json(trajectory.task),
            # a review flag's rule is not checked to be a name: text, as the event's payload is
            "gate_flags": [f.model_copy(update={"rule": redactor.redact_json(f.rule)}) for f in trajectory.gate_flags],
        }
    )


Token = list[Any]  # [id, text, loss_mask, logprob] as the token view lists it


def redact_tokens(
    redactor: Redactor, tokens: list[Token], starts: dict[str, int]
) -> tuple[list[Token], dict[str, int]]:
    """A token view row with each redacted span shown as one block over the tokens it covers.

    A block is `[None, "[REDACTED:kind]", loss_mask, None, count]`: no id (ids decode back to the text), trained if any
    token under it is, and how many tokens it stands for. `starts` (a call's first token) is moved to the new positions.
    Without token texts (no tokenizer) nothing can be found: the row is returned as it is.
    """
    texts: list[str | None] = [t[1] for t in tokens]
    if not tokens or any(text is None for text in texts):
        return tokens, starts
    ends = list(itertools.accumulate(len(text or "") for text in texts))  # where each token's text ends
    blocks: list[tuple[int, int, str]] = []  # (first token, last token, kind), in order
    for span in redactor.spans("".join(text or "" for text in texts)):
        first = bisect.bisect_right(ends, span.start)  # the first token ending after the span starts
        if first == len(tokens):
            break
        last = max(first, bisect.bisect_left(ends, span.end, 0, len(tokens) - 1))  # the token it ends in
        if blocks and blocks[-1][1] >= first:  # two spans meet inside one token: one block
            first, end, kind = blocks.pop()
            blocks.append((first, max(end, last), kind))
        else:
            blocks.append((first, last, span.kind))
    by_first = {first: (last, kind) for first, last, kind in blocks}
    shown: list[Token] = []
    moved: list[int] = []  # each token's place in `shown`
    i = 0
    while i < len(tokens):
        last, kind = by_first.get(i, (i, None))
        covered = tokens[i : last + 1]
        moved += [len(shown)] * len(covered)
        shown.append(
            tokens[i] if kind is None else [None, mark(kind), max(int(t[2]) for t in covered), None, len(covered)]
        )
        i = last + 1
    return shown, {seq: moved[index] if 0 <= index < len(moved) else len(shown) for seq, index in starts.items()}
