"""Capture health of a run, per step of its metrics: what the gateway recorded and what the sample builder made of it.

Per training step: rollouts by outcome and every attempt's failure kind (infra and timeout attempts are
retried and never trained on; task failures are), the rows the builder made (single-call vs merged rows,
prefix breaks by cause), calls dropped by reason (token/logprob mismatches among them), calls the gateway
flagged, calls cut off at their length limit (finish reason `length`), and the hard gates' violations
(`reward_hacking` events from alight.guards, by rule: the trainer leaves those rollouts out).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from alight.evaluation import REWARD_HACKING
from alight.schemas import Mode, Rollout, RolloutState
from alight_server.call_output import call_output
from alight_server.store import Store
from alight_server.store.browse import RolloutFilter
from alight_server.trajectory import build_trajectory
from alight_server.ui import samples, summaries

MAX_ROLLOUTS = 100_000


def run_health(store: Store, run_id: str) -> dict[str, Any]:
    run = store.get_run(run_id)
    found, _ = store.browse_rollouts(RolloutFilter(mode=Mode.TRAIN, id_prefix=f"{run_id}-"), limit=MAX_ROLLOUTS)
    by_step: dict[int, list[Rollout]] = defaultdict(list)
    for rollout in found:
        by_step[summaries.metrics_step(rollout) or 0].append(rollout)
    config = samples.sample_config(run.config)
    decode = samples.decoder(samples.model_name(store, run.config))
    steps = [step_health(store, step, rollouts, config, decode) for step, rollouts in sorted(by_step.items())]
    return {"run_id": run_id, "steps": steps}


def step_health(store: Store, step: int, rollouts: list[Rollout], config: Any, decode: Any) -> dict[str, Any]:
    from alight_server.trainer.samples import build_samples

    states = Counter(r.state.value for r in rollouts)
    attempt_failures = Counter(a.failure_kind.value for r in rollouts for a in r.attempts if a.failure_kind is not None)
    # What the trainer trains on: the latest attempt of each finished, non-cancelled rollout.
    finished = [r for r in rollouts if r.state in (RolloutState.SUCCEEDED, RolloutState.FAILED) and r.attempts]
    trajectories = [build_trajectory(store, r.id) for r in finished]
    calls = [tc.call for t in trajectories for tc in t.calls]
    batch, report = build_samples(trajectories, config, decode=decode)
    merged = sum(len(seqs) > 1 for seqs in batch.row_calls)
    gates = {r.id: gate_rules(store, r.id) for r in rollouts}
    return {
        "step": step,
        "rollouts": len(rollouts),
        "states": dict(states),
        "attempt_failures": dict(attempt_failures),
        "calls": len(calls),
        "calls_used": report.calls_used,
        "rows": report.rows,
        "merged_rows": merged,
        "single_call_rows": report.rows - merged,
        "breaks": dict(report.breaks),
        "dropped_rollouts": _nonzero(report.dropped_rollouts),
        "dropped_calls": _nonzero(report.dropped_calls),
        "logprob_mismatches": report.dropped_calls.get("logprob_length_mismatch", 0),
        "flagged_calls": dict(Counter(flag for c in calls for flag in c.flags)),
        "truncated_calls": sum(call_output(c).finish_reason == "length" for c in calls),
        "truncated_rows": report.truncated_rows,
        "trained_tokens": report.trained_tokens,
        "gate_violations": dict(sorted(Counter(rule for rules in gates.values() for rule in rules).items())),
        "gate_flagged_rollouts": sum(bool(rules) for rules in gates.values()),
    }


def gate_rules(store: Store, rollout_id: str) -> set[str]:
    """The gate rules a rollout broke, in any attempt (as trainer/filters.py reads them to leave it out)."""
    return {str(e.payload.get("rule")) for e in store.list_events(rollout_id, kind=REWARD_HACKING)}


def _nonzero(counts: Counter[str]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}  # the builder adds a reason with 0 for a rollout with no calls
