"""Trajectory route: GET /api/rollouts/{id}/trajectory, one attempt's calls joined with spans and rewards."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from alight.schemas import Trajectory
from alight_server.deps import AdminDep, StoreDep
from alight_server.trajectory import build_trajectory

router = APIRouter(tags=["trajectories"])


@router.get("/rollouts/{rollout_id}/trajectory", response_model=Trajectory)
def get_trajectory(
    rollout_id: str,
    store: StoreDep,
    _: AdminDep,
    attempt: Annotated[int | None, Query(ge=1, le=2**31 - 1, description="attempt number; default the latest")] = None,
) -> Trajectory:
    """Model calls in order with span paths, agent names and step rewards; tool spans; rewards; status."""
    return build_trajectory(store, rollout_id, attempt)
