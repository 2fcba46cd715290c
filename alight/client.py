"""AlightClient: the typed, synchronous HTTP client for the server's /api routes; a refusal raises ApiError."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from alight.api_models import (
    ClaimRequest,
    ClaimResult,
    EventList,
    PolicyCreate,
    PolicyState,
    RewardList,
    RolloutBatch,
    RolloutList,
    RolloutPage,
    RolloutQuery,
    RunnerHandle,
    StatusChange,
    UpstreamList,
    WaitRequest,
    WaitResult,
)
from alight.schemas import (
    Attempt,
    AttemptFinish,
    AttemptStart,
    Event,
    EventCreate,
    PolicyVersion,
    Reward,
    RewardCreate,
    Rollout,
    RolloutCreate,
    RolloutState,
    Run,
    RunReport,
    RunStep,
    RunStepReport,
    Trajectory,
    Upstream,
    UpstreamCreate,
)

M = TypeVar("M", bound=BaseModel)


class ApiError(Exception):
    """The server refused a request: `status_code`, `message` and `error_type` from its JSON answer."""

    def __init__(self, status_code: int, message: str, error_type: str | None = None, method: str = "", url: str = ""):
        super().__init__(f"{method} {url} -> {status_code}: {message}".strip())
        self.status_code = status_code
        self.message = message
        self.error_type = error_type


class AlightClient:
    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        admin_key: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """`api_key` (alias `admin_key`) is the admin key, or an attempt token for an agent's own routes."""
        key = api_key or admin_key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> AlightClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, *, body: BaseModel | None = None, **kwargs: Any) -> httpx.Response:
        """Send one request; raise ApiError on any 4xx/5xx with the server's message."""
        if body is not None:
            kwargs["content"] = body.model_dump_json(exclude_unset=False)
            kwargs.setdefault("headers", {})["Content-Type"] = "application/json"
        response = self.http.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise _api_error(response)
        return response

    def _call(self, model: type[M], method: str, path: str, **kwargs: Any) -> M:
        return model.model_validate_json(self.request(method, path, **kwargs).content)

    def ready(self) -> bool:
        try:
            return self.http.get("/readyz").status_code == 200
        except httpx.TransportError:
            return False

    def create_rollouts(self, items: Iterable[RolloutCreate]) -> list[Rollout]:
        return self._call(RolloutList, "POST", "/api/rollouts", body=RolloutBatch(rollouts=list(items))).rollouts

    def list_rollouts_page(self, query: RolloutQuery | None = None) -> RolloutPage:
        params = (query or RolloutQuery()).model_dump(mode="json", exclude_none=True)
        return self._call(RolloutPage, "GET", "/api/rollouts", params=params)

    def list_rollouts(self, query: RolloutQuery | None = None) -> list[Rollout]:
        """Rollouts changed after `query.since_seq`, oldest change first (continue from the last one's `seq`)."""
        return self.list_rollouts_page(query).rollouts

    def get_rollout(self, rollout_id: str) -> Rollout:
        return self._call(Rollout, "GET", f"/api/rollouts/{rollout_id}")

    def set_status(self, rollout_id: str, state: RolloutState) -> Rollout:
        return self._call(Rollout, "POST", f"/api/rollouts/{rollout_id}/status", body=StatusChange(state=state))

    def cancel_rollout(self, rollout_id: str) -> Rollout:
        return self._call(Rollout, "POST", f"/api/rollouts/{rollout_id}/cancel")

    def wait_rollouts(self, ids: Sequence[str], timeout_s: float = 30.0) -> WaitResult:
        """Block until all `ids` are final or `timeout_s` passes (server-side long-poll)."""
        body = WaitRequest(ids=list(ids), timeout_s=timeout_s)
        return self._call(WaitResult, "POST", "/api/rollouts/wait", body=body, timeout=timeout_s + self.timeout)

    def add_event(self, rollout_id: str, event: EventCreate) -> Event:
        return self._call(Event, "POST", f"/api/rollouts/{rollout_id}/events", body=event)

    def list_events(
        self, rollout_id: str, *, attempt: int | None = None, kind: str | None = None, reveal: bool = False
    ) -> list[Event]:
        """The rollout's events; their payloads (attempt logs, evidence) redacted for people unless `reveal`."""
        params = _given(attempt=attempt, kind=kind, reveal="true" if reveal else None)
        return self._call(EventList, "GET", f"/api/rollouts/{rollout_id}/events", params=params).events

    def add_reward(self, rollout_id: str, reward: RewardCreate) -> Reward:
        return self._call(Reward, "POST", f"/api/rollouts/{rollout_id}/rewards", body=reward)

    def list_rewards(self, rollout_id: str, *, attempt: int | None = None) -> list[Reward]:
        params = _given(attempt=attempt)
        return self._call(RewardList, "GET", f"/api/rollouts/{rollout_id}/rewards", params=params).rewards

    # ---- attempts (the controller's side)

    def claim_attempts(
        self, limit: int = 1, ids: Sequence[str] | None = None, runner: str | None = None
    ) -> list[AttemptStart]:
        body = ClaimRequest(limit=limit, ids=list(ids) if ids is not None else None, runner=runner)
        return self._call(ClaimResult, "POST", "/api/attempts/claim", body=body).attempts

    def set_runner_handle(self, rollout_id: str, attempt: int, handle: str) -> Attempt:
        path = f"/api/rollouts/{rollout_id}/attempts/{attempt}/handle"
        return self._call(Attempt, "POST", path, body=RunnerHandle(runner_handle=handle))

    def finish_attempt(self, rollout_id: str, attempt: int, finish: AttemptFinish) -> Rollout:
        return self._call(Rollout, "POST", f"/api/rollouts/{rollout_id}/attempts/{attempt}/finish", body=finish)

    def add_upstream(self, upstream: UpstreamCreate) -> Upstream:
        return self._call(Upstream, "POST", "/api/upstreams", body=upstream)

    def list_upstreams(self) -> list[Upstream]:
        return self._call(UpstreamList, "GET", "/api/upstreams").upstreams

    def remove_upstream(self, upstream_id: str) -> None:
        self.request("DELETE", f"/api/upstreams/{upstream_id}")

    def policy(self) -> PolicyState:
        return self._call(PolicyState, "GET", "/api/policy")

    def add_policy_version(self, metadata: dict[str, Any] | None = None) -> PolicyVersion:
        return self._call(PolicyVersion, "POST", "/api/policy", body=PolicyCreate(metadata=metadata or {}))

    # ---- routes added by other areas go below this line

    def trajectory(self, rollout_id: str, attempt: int | None = None, *, reveal: bool = False) -> Trajectory:
        """One attempt (default: the latest) joined: calls with span paths, tool spans, rewards.

        A copy for people (secrets and personal data redacted; a call with anything hidden has no token
        ids) unless `reveal`: the exact data, for training and exports of training data.
        """
        params = _given(attempt=attempt, reveal="true" if reveal else None)
        return self._call(Trajectory, "GET", f"/api/rollouts/{rollout_id}/trajectory", params=params)

    # training runs, for the dashboard

    def report_run(self, report: RunReport) -> Run:
        return self._call(Run, "POST", "/api/runs", body=report)

    def get_run(self, run_id: str) -> Run:
        return self._call(Run, "GET", f"/api/runs/{run_id}")

    def report_run_step(self, run_id: str, report: RunStepReport) -> RunStep:
        return self._call(RunStep, "POST", f"/api/runs/{run_id}/steps", body=report)

    # gateway: pause, drain and resume around a weight update

    def pause_gateway(self, policy: str | None = None) -> dict[str, Any]:
        """New model calls get 429 + Retry-After until resume; calls already in flight finish.

        With several policies, `policy` pauses only the calls routed to it; the others run on.
        """
        return self.request("POST", "/api/gateway/pause", json=_given(policy=policy)).json()

    def drain_gateway(self, timeout_s: float = 60.0, policy: str | None = None) -> dict[str, Any]:
        """Wait until no model call (of `policy`, when given) is in flight on any gateway replica:
        `{"drained", "in_flight_at_start", "waited_s", "replicas"}`."""
        body = _given(timeout_s=timeout_s, policy=policy)
        return self.request("POST", "/api/gateway/drain", json=body, timeout=timeout_s + 30).json()

    def resume_gateway(
        self,
        *,
        weights_changed: bool = False,
        policy_version: int | None = None,
        metadata: dict[str, Any] | None = None,
        policy: str | None = None,
    ) -> dict[str, Any]:
        """Reopen the gateway (or `policy`'s calls); with `weights_changed` later calls count as the next (or
        given) policy version, which with `policy` is recorded as changing only that policy."""
        body = _given(
            weights_changed=weights_changed, metadata=metadata or {}, policy_version=policy_version, policy=policy
        )
        return self.request("POST", "/api/gateway/resume", json=body).json()

    def gateway_status(self) -> dict[str, Any]:
        """`{"paused", "in_flight", "policy_version", "paused_seconds_total", "upstreams", "paused_policies",
        "in_flight_by_policy", "own_versions", ...}`."""
        return self.request("GET", "/api/gateway/status").json()


def _api_error(response: httpx.Response) -> ApiError:
    message, error_type = response.text[:2000] or response.reason_phrase, None
    with contextlib.suppress(ValueError, AttributeError):  # not JSON, or not an object
        error = response.json().get("error")
        if isinstance(error, dict):
            message, error_type = str(error.get("message", message)), error.get("type")
    return ApiError(response.status_code, message, error_type, response.request.method, str(response.request.url))


def _given(**values: Any) -> dict[str, Any]:
    """A request's query or JSON body: the values given, None left out (the server's default)."""
    return {name: value for name, value in values.items() if value is not None}
