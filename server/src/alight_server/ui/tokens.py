"""The token view: the exact training rows the sample builder makes from one attempt, token by token.

Each row lists its tokens as `[id, text, loss_mask, logprob]` (text null without a tokenizer, logprob
null off the mask), where each merged call's generated tokens start, and why the row started: the
attempt's first conversation, a new conversation (a sub-agent), or a prefix break with its cause.
In a copy for people a redacted span is one block, `[null, "[REDACTED:kind]", loss_mask, null, count]`.
"""

from __future__ import annotations

from typing import Any

from alight.schemas import Trajectory
from alight_server.redaction import Redactor
from alight_server.redaction.views import redact_tokens
from alight_server.store import Store
from alight_server.ui import samples


def token_view(store: Store, trajectory: Trajectory, redaction: Redactor | None = None) -> dict[str, Any]:
    """Run the real sample builder on this one trajectory, with the settings of the run it belongs to.

    With a redactor (a copy for people), each redacted span of a row's text becomes one block over the
    tokens it covers (redaction/views.py `redact_tokens`); the builder itself always reads the exact data.
    """
    from alight_server.trainer.samples import build_samples

    rollout = store.get_rollout(trajectory.rollout_id)
    run = samples.run_of(store, rollout)
    config = samples.sample_config(run.config if run else None)
    model = samples.model_name(store, run.config if run else None, [tc.call.upstream for tc in trajectory.calls])
    batch, report = build_samples([trajectory], config, decode=samples.decoder(model))
    causes = {e.call_seq: e.cause for e in report.break_examples}
    calls = {tc.call.seq: tc.call for tc in trajectory.calls}
    rows = []
    for r in range(batch.num_rows):
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
        rows.append(
            {
                "calls": list(batch.row_calls[r]),
                "starts": starts,
                "cause": causes.get(first, "conversation"),
                "tokens": shown,
                "length": length,
                "trained_tokens": int(sum(mask)),
            }
        )
    return {
        "model": model,
        "run_id": run.id if run else None,
        "mode": config.mode,
        "decoded": samples.decoder(model) is not None,
        "redacted": redaction is not None,
        "rows": rows,
        "dropped_rollout": next(iter(report.dropped_rollouts), None),
        "dropped_calls": dict(report.dropped_calls),
        "breaks": dict(report.breaks),
        "truncated_rows": report.truncated_rows,
    }
