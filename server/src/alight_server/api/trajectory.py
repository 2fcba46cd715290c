"""Trajectory route: GET /api/rollouts/{id}/trajectory, one attempt's calls joined with spans and rewards."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from alight.schemas import Trajectory
from alight_server.http.deps import RedactionDep, StoreDep
from alight_server.redaction.views import redact_trajectory
from alight_server.trajectories.join import build_trajectory

router = APIRouter(tags=["trajectories"])


@router.get("/rollouts/{rollout_id}/trajectory", response_model=Trajectory)
def get_trajectory(
    rollout_id: str,
    store: StoreDep,
    redaction: RedactionDep,
    attempt: Annotated[int | None, Query(ge=1, le=2**31 - 1, description="attempt number; default the latest")] = None,
) -> Trajectory:
    """Model calls in order with span paths, agent names and step rewards; tool spans; rewards; status.

    A copy for people unless `reveal=true`: content redacted, and a call with anything hidden carries the
    flag `redacted` and no token ids. The trainer reads with `reveal=true`: training data is exact.
    """
    trajectory = build_trajectory(store, rollout_id, attempt)
    return trajectory if redaction is None else redact_trajectory(redaction, trajectory)
