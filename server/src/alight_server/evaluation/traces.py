"""`alight eval CONFIG --traces NAME`: the config's evaluator over imported trajectories, no agent run.

Each rollout of the imported run is joined into its trajectory and handed to the evaluator exactly as the
server hands it a finished attempt; the rewards are stored on the rollout (source `evaluator`, ids
`eval-1...`, so a second run changes nothing) and the baseline report is built over them.
"""

from __future__ import annotations

from alight.evaluation import EvalReport, build_report
from alight_server.evaluation.evaluators import Evaluator, score_attempt
from alight_server.store.base import Store
from alight_server.traces.check import run_rollouts
from alight_server.trajectories.join import build_trajectory


def evaluate_traces(store: Store, run_id: str, evaluate: Evaluator) -> EvalReport:
    rollouts = [r for r in run_rollouts(store, run_id) if r.attempts]
    if not rollouts:
        raise ValueError(f"no imported rollouts under run {run_id!r}; import traces first with alight data import")
    for rollout in rollouts:
        score_attempt(store, rollout, build_trajectory(store, rollout.id), evaluate)
    scored = [build_trajectory(store, r.id) for r in rollouts]
    return build_report(rollouts, scored, [e for r in rollouts for e in store.list_events(r.id)])
