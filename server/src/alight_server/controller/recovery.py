"""Restart recovery: sort what an earlier controller left behind into adopt, forget, or fail as infra."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from alight.api_models import RolloutQuery
from alight.client import AlightClient, ApiError
from alight.schemas import AttemptFinish, AttemptStatus, FailureKind, Rollout, RolloutState, parse_handle
from alight_server.controller.base import Runner

PAGE = 500


@dataclass(frozen=True)
class Leftover:
    """An attempt the runner still holds from before the restart, with the server's view of it."""

    handle: str
    rollout_id: str
    attempt: int
    rollout: Rollout | None  # None: the server does not know the rollout (any more)

    @property
    def running_on_server(self) -> bool:
        attempts = self.rollout.attempts if self.rollout is not None else []
        return any(a.attempt == self.attempt and a.status is AttemptStatus.RUNNING for a in attempts)


def leftovers(client: AlightClient, runner: Runner, skip: Collection[str] = ()) -> list[Leftover]:
    """Every attempt the runner holds (except `skip`): adopt those still running on the server, forget the rest."""
    held = [(handle, parse_handle(handle)) for handle in runner.handles() if handle not in skip]
    return [Leftover(handle, rid, attempt, get_rollout(client, rid)) for handle, (_, rid, attempt) in held]


def orphans(client: AlightClient, runner_name: str, held: Collection[str]) -> list[tuple[str, int, AttemptFinish]]:
    """(rollout id, attempt, infra finish) for attempts running on the server under this runner's name
    that no runner holds: a controller recorded the handle, then died before starting the process."""
    prefix = f"{runner_name}/"
    found = []
    for rollout in running_rollouts(client):
        current = max(rollout.attempts, key=lambda a: a.attempt, default=None)
        if current is None or current.status is not AttemptStatus.RUNNING:
            continue
        handle = current.runner_handle
        if handle and handle.startswith(prefix) and handle not in held:
            finish = AttemptFinish(
                status="failed",
                failure_kind=FailureKind.INFRA,
                message=f"{runner_name} holds no process for {handle}: its controller stopped before starting it",
                runner_handle=handle,
            )
            found.append((rollout.id, current.attempt, finish))
    return found


def running_rollouts(client: AlightClient) -> list[Rollout]:
    found: list[Rollout] = []
    since = 0
    while True:
        page = client.list_rollouts(RolloutQuery(state=[RolloutState.RUNNING], since_seq=since, limit=PAGE))
        found.extend(page)
        if len(page) < PAGE:
            return found
        since = page[-1].seq


def get_rollout(client: AlightClient, rollout_id: str) -> Rollout | None:
    try:
        return client.get_rollout(rollout_id)
    except ApiError as exc:
        if exc.status_code == 404:
            return None
        raise
