"""The dashboard's read-only JSON routes under /api/ui: the admin key or a viewer key (which reads redacted copies;
an imported run's check is the admin's only)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request

from alight.attempt_logs import LOG_EVENT_KIND
from alight.evaluation import REWARD_HACKING
from alight.schemas import JUDGEMENT, FailureKind, Mode, RolloutState
from alight_server.http.deps import AdminDep, ReaderDep, RedactionDep, StoreDep, viewer_copy
from alight_server.redaction.views import redact_rollout, redact_run, redact_trajectory
from alight_server.store.browse import RolloutFilter
from alight_server.trajectories.join import build_trajectory
from alight_server.ui import health, samples, summaries, tokens

router = APIRouter(tags=["dashboard"])

RunId = Annotated[str, Path(max_length=200)]
RolloutId = Annotated[str, Path(max_length=200)]
AttemptNo = Annotated[int | None, Query(ge=1, le=2**31 - 1, description="default the latest")]


def step_prefix(run_id: str, step: int | None, mode: Mode | None) -> str:
    """The id prefix of a run's rollouts, as the training loop names them (trainer/run/phases.py).

    `step` is the step of the run's metrics: training step N is made of the rollouts created before
    update N (named `s{N-1}`), the validation at step N of `val{N}` (0: before training).
    """
    if step is None:
        return f"{run_id}-"
    if mode == Mode.VAL:
        return f"{run_id}-val{step:05d}-"
    if step < 1:
        raise HTTPException(422, "training steps count from 1 (step 0 is the validation before training: mode=val)")
    return f"{run_id}-s{step - 1:05d}-"


@router.get("/rollouts")
def browse_rollouts(
    store: StoreDep,
    _: ReaderDep,
    state: Annotated[list[RolloutState] | None, Query(description="repeat to match any of several")] = None,
    mode: Mode | None = None,
    group_id: Annotated[str | None, Query(max_length=200)] = None,
    run: Annotated[str | None, Query(max_length=200, description="a run id: its rollouts only")] = None,
    step: Annotated[
        int | None, Query(ge=0, le=2**31 - 1, description="with `run`: that step's rollouts (train unless mode=val)")
    ] = None,
    failure_kind: FailureKind | None = None,
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
    per_page: Annotated[int, Query(ge=1, le=200)] = 50,
) -> dict[str, Any]:
    """A page of rollout rows in creation order, with the reward spread of each group on the page."""
    if step is not None and run is None:
        raise HTTPException(422, "`step` picks a step of a run: pass `run` as well")
    where = RolloutFilter(
        state=state,
        mode=mode,
        group_id=group_id,
        id_prefix=step_prefix(run, step, mode) if run else None,
        failure_kind=failure_kind,
    )
    found, total = store.browse_rollouts(where, offset=(page - 1) * per_page, limit=per_page)
    groups = summaries.group_spreads(store, [r.group_id for r in found if r.group_id])
    return {
        "rollouts": [summaries.rollout_row(store, r) for r in found],
        "groups": groups,
        "total": total,
        "page": page,
        "per_page": per_page,
    }


@router.get("/rollouts/{rollout_id}/view")
def rollout_view(
    rollout_id: RolloutId, store: StoreDep, redaction: RedactionDep, attempt: AttemptNo = None
) -> dict[str, Any]:
    """The rollout, one attempt's trajectory (calls, tool spans, rewards) and that attempt's captured log.

    Secrets and personal data are redacted in the task, the trajectory, the log and the gate evidence
    unless `reveal=true` (redaction/views.py).
    """
    rollout = store.get_rollout(rollout_id)
    trajectory = build_trajectory(store, rollout_id, attempt)
    logs = store.list_events(rollout_id, attempt=trajectory.attempt, kind=LOG_EVENT_KIND)
    gates = store.list_events(rollout_id, kind=REWARD_HACKING)
    log = str(logs[-1].payload.get("text", "")) if logs else None
    gate_violations = [{"attempt": e.attempt, **e.payload} for e in gates]
    # the judge's calls on this attempt (trainer/judge): beside the rollout, never among its model calls
    judgements = [e.payload for e in store.list_events(rollout_id, attempt=trajectory.attempt, kind=JUDGEMENT)]
    if redaction is not None:
        rollout = redact_rollout(redaction, rollout)
        trajectory = redact_trajectory(redaction, trajectory)
        log = redaction.redact(log) if log is not None else None
        gate_violations = redaction.redact_json(gate_violations)
        judgements = redaction.redact_json(judgements)
    return {
        "rollout": rollout.model_dump(mode="json"),
        "run_id": run.id if (run := samples.run_of(store, rollout)) else None,
        "policies": list(samples.run_policies(run.config if run else None)),  # config order: the policies' colours
        "trajectory": trajectory.model_dump(mode="json"),
        "log": log,
        "gate_violations": gate_violations,
        "judgements": judgements,
        "redacted": redaction is not None,
    }


@router.get("/rollouts/{rollout_id}/tokens")
def rollout_tokens(
    rollout_id: RolloutId, store: StoreDep, redaction: RedactionDep, attempt: AttemptNo = None
) -> dict[str, Any]:
    """The training rows the sample builder makes from this attempt, token by token (see ui/tokens.py).

    Unless `reveal=true`, each redacted span is one marked block over the tokens it covers.
    """
    trajectory = build_trajectory(store, rollout_id, attempt)
    try:
        return tokens.token_view(store, trajectory, redaction)
    except (ImportError, samples.NeedsTrainExtra) as exc:
        raise HTTPException(501, samples.TRAIN_HINT) from exc


@router.get("/runs/{run_id}/curves")
def run_curves(run_id: RunId, request: Request, store: StoreDep, caller: ReaderDep) -> dict[str, Any]:
    """The run, every step's metrics, and each validation's score interval from its rollouts."""
    return {
        "run": redact_run(viewer_copy(request, caller), store.get_run(run_id)).model_dump(mode="json"),
        "steps": [s.model_dump(mode="json") for s in store.list_run_steps(run_id)],
        "validation": summaries.validation_intervals(store, run_id),
    }


@router.get("/runs/{run_id}/health")
def run_health(run_id: RunId, store: StoreDep, _: ReaderDep) -> dict[str, Any]:
    """Capture health per training step (see ui/health.py)."""
    try:
        return health.run_health(store, run_id)
    except (ImportError, samples.NeedsTrainExtra) as exc:
        raise HTTPException(501, samples.TRAIN_HINT) from exc


@router.get("/runs/{run_id}/check")
def run_check(run_id: RunId, store: StoreDep, _: AdminDep) -> dict[str, Any]:
    """An imported run (`alight data import`) as `alight data check` prints it: what the sample builder makes of its
    trajectories (fidelity, rows, breaks, first differing tokens)."""
    run = store.get_run(run_id)
    try:
        from alight_server.traces.check import check_run

        config = samples.sample_config(run.config)
    except (ImportError, samples.NeedsTrainExtra) as exc:
        raise HTTPException(501, samples.TRAIN_HINT) from exc
    report = check_run(store, run_id, config, samples.decoder(samples.model_name(store, run.config)))
    return {"run": run.model_dump(mode="json"), "check": report.as_dict()}
