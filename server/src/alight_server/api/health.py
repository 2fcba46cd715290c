"""Health probes: /healthz (the process answers) and /readyz (the store answers too)."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from alight.api_models import Health
from alight_server.http.deps import StoreDep
from alight_server.http.errors import error_response

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"description": "the store does not answer"}})
async def readyz(store: StoreDep) -> object:
    try:
        await run_in_threadpool(store.current_policy_version)
    except Exception as exc:  # any store failure means "not ready", never a 500
        return error_response(503, f"store not ready: {type(exc).__name__}: {exc}")
    return Health(status="ok")
