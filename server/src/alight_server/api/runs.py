"""Training run routes: a trainer reports its run and each step's metrics; the dashboard reads them back."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request

from alight.api_models import RunList, RunStepList
from alight.schemas import Run, RunReport, RunStep, RunStepReport
from alight_server.http.deps import AdminDep, ReaderDep, StoreDep, viewer_copy
from alight_server.redaction.views import redact_run

router = APIRouter(tags=["runs"])

RunId = Annotated[str, Path(max_length=200, description="the run id the trainer reported")]


@router.post("/runs", response_model=Run)
def report_run(body: RunReport, store: StoreDep, _: AdminDep) -> Run:
    """Insert or update a run: at start (status running, the config), and at the end (succeeded or failed)."""
    return store.report_run(body)


@router.get("/runs", response_model=RunList)
def list_runs(
    request: Request, store: StoreDep, caller: ReaderDep, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> RunList:
    """Newest first."""
    return RunList(runs=[redact_run(viewer_copy(request, caller), r) for r in store.list_runs(limit=limit)])


@router.get("/runs/{run_id}", response_model=Run)
def get_run(run_id: RunId, request: Request, store: StoreDep, caller: ReaderDep) -> Run:
    """The run; a viewer key reads its config redacted."""
    return redact_run(viewer_copy(request, caller), store.get_run(run_id))


@router.post("/runs/{run_id}/steps", response_model=RunStep)
def report_step(run_id: RunId, body: RunStepReport, store: StoreDep, _: AdminDep) -> RunStep:
    """One step's metrics; reporting a step again merges them (a resumed run repeats its last step)."""
    return store.add_run_step(run_id, body)


@router.get("/runs/{run_id}/steps", response_model=RunStepList)
def list_steps(run_id: RunId, store: StoreDep, _: ReaderDep) -> RunStepList:
    return RunStepList(steps=store.list_run_steps(run_id))
