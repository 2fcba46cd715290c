"""Capture health of a run, per step of its metrics: what the gateway recorded and what the sample builder made of it.

What each step counts and costs: docs/dashboard.md "Capture health". With several policies the builder runs on
each policy's share of the calls, as the trainer does, and the step also gives each policy's own counts
(`policies`); a call's `policy:<name>` flag is routing, not a flag.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

from alight.cost import Prices, cost_summary
from alight.evaluation import REWARD_HACKING, SUCCESS_AT
from alight.schemas import Mode, Rollout, RolloutState
from alight_server.policies.routing import POLICY_FLAG
from alight_server.store import Store
from alight_server.store.browse import RolloutFilter
from alight_server.trajectories.call_output import call_output
from alight_server.trajectories.join import build_trajectory
from alight_server.ui import policy_parts, samples, summaries

MAX_ROLLOUTS = 100_000


def run_health(store: Store, run_id: str) -> dict[str, Any]:
    run = store.get_run(run_id)
    found, _ = store.browse_rollouts(RolloutFilter(mode=Mode.TRAIN, id_prefix=f"{run_id}-"), limit=MAX_ROLLOUTS)
    by_step: dict[int, list[Rollout]] = defaultdict(list)
    for rollout in found:
        by_step[summaries.metrics_step(rollout) or 0].append(rollout)
    config = samples.sample_config(run.config)
    decode = samples.decoder(samples.model_name(store, run.config))
    policies = samples.run_policies(run.config)  # {} for one policy
    priced = (run.config or {}).get("prices")
    prices = Prices.model_validate(priced) if priced else None  # as the trainer validated it
    steps = [
        step_health(store, step, rollouts, config, decode, policies, prices)
        for step, rollouts in sorted(by_step.items())
    ]
    return {"run_id": run_id, "steps": steps}


def step_health(
    store: Store,
    step: int,
    rollouts: list[Rollout],
    config: Any,
    decode: Any,
    policies: Mapping[str, str | None],
    prices: Prices | None = None,
) -> dict[str, Any]:
    """One step's counts and its rollouts' cost (alight/cost.py, as the step's `cost/` metrics). With several
    `policies` (name -> named reward; the split: ui/policy_parts.py) counts are summed, a rollout left out of any
    policy's samples counts once per reason, and `policies` in the answer gives each policy's own counts."""
    from alight_server.trainer.step.samples import build_samples

    states = Counter(r.state.value for r in rollouts)
    attempt_failures = Counter(a.failure_kind.value for r in rollouts for a in r.attempts if a.failure_kind is not None)
    # What the trainer trains on: the latest attempt of each finished, non-cancelled rollout.
    finished = [r for r in rollouts if r.state in (RolloutState.SUCCEEDED, RolloutState.FAILED) and r.attempts]
    trajectories = [build_trajectory(store, r.id) for r in finished]
    calls = [tc.call for t in trajectories for tc in t.calls]
    split = policy_parts.split_run(trajectories, policies)
    total = Counter[str]()
    dropped_calls, breaks = Counter[str](split.dropped_calls), Counter[str]()
    dropped_rollouts: dict[str, set[str]] = {}
    own: dict[str, dict[str, Any]] = {}
    for policy, part in split.parts:
        batch, report = build_samples(part, config, decode=decode)
        merged = sum(len(seqs) > 1 for seqs in batch.row_calls)
        counts = {"calls": report.calls, "calls_used": report.calls_used, "rows": report.rows, "merged_rows": merged,
                  "truncated_rows": report.truncated_rows, "trained_tokens": report.trained_tokens}  # fmt: skip
        total.update(counts)
        dropped_calls.update(report.dropped_calls)
        breaks.update(report.breaks)
        kept = set(batch.rollout_ids)  # each one left out is built alone for its reasons (it stops at the reward)
        for left_out in (t for t in part if t.rollout_id not in kept):
            for reason in build_samples([left_out], config)[1].dropped_rollouts:
                dropped_rollouts.setdefault(reason, set()).add(left_out.rollout_id)
        if policy is not None:
            own[policy] = {**counts, "dropped_rollouts": _nonzero(report.dropped_rollouts),
                           "no_named_reward": len(split.no_named_reward.get(policy, ()))}  # fmt: skip
    for ids in split.no_named_reward.values():
        dropped_rollouts.setdefault("no_named_reward", set()).update(ids)
    health = {
        "step": step,
        "rollouts": len(rollouts),
        "states": dict(states),
        "attempt_failures": dict(attempt_failures),
        "calls": len(calls),
        **{key: total[key] for key in ("calls_used", "rows", "merged_rows")},
        "single_call_rows": total["rows"] - total["merged_rows"],
        "breaks": dict(breaks),
        "dropped_rollouts": {reason: len(ids) for reason, ids in dropped_rollouts.items() if ids},
        "dropped_calls": _nonzero(dropped_calls),
        **_call_counts(calls, dropped_calls),
        "truncated_rows": total["truncated_rows"],
        "trained_tokens": total["trained_tokens"],
        **_gate_counts(store, rollouts),
        "cost": cost_summary(finished, trajectories, prices, SUCCESS_AT).as_dict(),
    }
    return {**health, "policies": own} if own else health


def _call_counts(calls: list[Any], dropped_calls: Counter[str]) -> dict[str, Any]:
    """Calls dropped for a logprob length mismatch, flagged (by flag, a policy's own flag left out), cut at length."""
    return {
        "logprob_mismatches": dropped_calls.get("logprob_length_mismatch", 0),
        "flagged_calls": dict(Counter(flag for c in calls for flag in c.flags if not flag.startswith(POLICY_FLAG))),
        "truncated_calls": sum(call_output(c).finish_reason == "length" for c in calls),
    }


def _gate_counts(store: Store, rollouts: list[Rollout]) -> dict[str, Any]:
    """Rollouts with a gate violation by rule, and how many rollouts any gate flagged."""
    gates = {r.id: gate_rules(store, r.id) for r in rollouts}
    return {
        "gate_violations": dict(sorted(Counter(rule for rules in gates.values() for rule in rules).items())),
        "gate_flagged_rollouts": sum(bool(rules) for rules in gates.values()),
    }


def gate_rules(store: Store, rollout_id: str) -> set[str]:
    """The gate rules a rollout broke, in any attempt (as trainer/step/filters.py reads them to leave it out)."""
    return {str(e.payload.get("rule")) for e in store.list_events(rollout_id, kind=REWARD_HACKING)}


def _nonzero(counts: Counter[str]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}  # the builder adds a reason with 0 for a rollout with no calls
