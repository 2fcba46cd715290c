"""The token view: the exact training rows the sample builder makes from one attempt, token by token.

Each row lists its tokens as `[id, text, loss_mask, logprob]` (text null without a tokenizer, logprob
null off the mask), where each merged call's generated tokens start, and why the row started: the
attempt's first conversation, a new conversation (a sub-agent), or a prefix break with its cause.
In a copy for people a redacted span is one block, `[null, "[REDACTED:kind]", loss_mask, null, count]`.
With several policies each row is one policy's (`policy`), as the trainer splits the calls.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from alight.schemas import ModelCall, Trajectory
from alight_server.policies.routing import policy_of
from alight_server.redaction import Redactor
from alight_server.redaction.views import redact_tokens
from alight_server.store import Store
from alight_server.ui import policy_parts, samples

if TYPE_CHECKING:
    from alight_server.trainer.step.samples import SampleBatch


def token_view(store: Store, trajectory: Trajectory, redaction: Redactor | None = None) -> dict[str, Any]:
    """Run the real sample builder on this one trajectory, with the settings of the run it belongs to, split by
    policy as the trainer splits (`_parts`); it reads the exact data, and `redaction` shapes only the answer."""
    from alight_server.trainer.step.samples import build_samples

    rollout = store.get_rollout(trajectory.rollout_id)
    run = samples.run_of(store, rollout)
    config = samples.sample_config(run.config if run else None)
    model = samples.model_name(store, run.config if run else None, [tc.call.upstream for tc in trajectory.calls])
    calls = {tc.call.seq: tc.call for tc in trajectory.calls}
    rows: list[dict[str, Any]] = []
    dropped_rollout: str | None = None
    dropped_calls: Counter[str] = Counter()
    breaks: Counter[str] = Counter()
    truncated = 0
    for policy, part in _parts(trajectory, run.config if run else None, dropped_calls):
        batch, report = build_samples([part], config, decode=samples.decoder(model))
        causes = {e.call_seq: e.cause for e in report.break_examples}
        rows += [_row(batch, r, calls, causes, model, policy, redaction) for r in range(batch.num_rows)]
        dropped_rollout = dropped_rollout or next(iter(report.dropped_rollouts), None)
        dropped_calls.update(report.dropped_calls)
        breaks.update(report.breaks)
        truncated += report.truncated_rows
    return {
        "model": model,
        "run_id": run.id if run else None,
        "mode": config.mode,
        "decoded": samples.decoder(model) is not None,
        "redacted": redaction is not None,
        "rows": rows,
        "dropped_rollout": dropped_rollout,
        "dropped_calls": {k: v for k, v in dropped_calls.items() if v},
        "breaks": dict(breaks),
        "truncated_rows": truncated,
    }


def _row(
    batch: SampleBatch,
    r: int,
    calls: dict[int, ModelCall],
    causes: dict[int, str],
    model: str | None,
    policy: str | None,
    redaction: Redactor | None,
) -> dict[str, Any]:
    """Row `r` of `policy`'s batch as the view shows it: its tokens, where each call starts, why the row began."""
    length = int(batch.attention_mask[r].sum())
    ids = batch.input_ids[r, :length].tolist()
    mask = batch.loss_mask[r, :length].tolist()
    logprobs = batch.old_logprobs[r, :length].tolist()
    texts = samples.token_texts(model, ids)
    first = batch.row_calls[r][0]
    shown: list[list[Any]] = [
        [ids[i], texts[i] if texts else None, int(mask[i]), logprobs[i] if mask[i] else None] for i in range(length)
    ]
    starts = {str(seq): len(calls[seq].prompt_token_ids) for seq in batch.row_calls[r]}
    if redaction is not None:
        shown, starts = redact_tokens(redaction, shown, starts)
    return {
        "calls": list(batch.row_calls[r]),
        "starts": starts,
        "cause": causes.get(first, "conversation"),
        "tokens": shown,
        "length": length,
        "trained_tokens": int(sum(mask)),
        "policy": policy,
    }


def _parts(
    trajectory: Trajectory, run_config: dict[str, Any] | None, dropped_calls: Counter[str]
) -> list[tuple[str | None, Trajectory]]:
    """(policy, its copy of the trajectory) per policy as the trainer splits it, by the run's policies (without a
    run, by the names its calls' flags give); [(None, trajectory)] with one. Calls left out count by reason."""
    policies = samples.run_policies(run_config)
    if not policies:
        flagged = [policy_of(tc.call.flags) for tc in trajectory.calls]
        policies = dict.fromkeys((f for f in flagged if f is not None), None)
    split = policy_parts.split_run([trajectory], policies)
    dropped_calls.update(split.dropped_calls)
    return [(name, part) for name, parts in split.parts for part in parts]
