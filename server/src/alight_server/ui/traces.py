"""The dashboard's view of an imported run (`alight data import`): the check report, as `alight data check` prints it."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path

from alight_server.http.deps import AdminDep, StoreDep
from alight_server.ui import samples

router = APIRouter(tags=["dashboard"])


@router.get("/runs/{run_id}/check")
def run_check(run_id: Annotated[str, Path(max_length=200)], store: StoreDep, _: AdminDep) -> dict[str, Any]:
    """What the sample builder makes of the run's trajectories: fidelity, rows, breaks, first differing tokens."""
    run = store.get_run(run_id)
    try:
        from alight_server.traces.check import check_run

        config = samples.sample_config(run.config)
    except (ImportError, samples.NeedsTrainExtra) as exc:
        raise HTTPException(501, samples.TRAIN_HINT) from exc
    report = check_run(store, run_id, config, samples.decoder(samples.model_name(store, run.config)))
    return {"run": run.model_dump(mode="json"), "check": report.as_dict()}
