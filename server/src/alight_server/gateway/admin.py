"""Admin routes for weight updates: pause, drain, resume (bumping the policy version), status; each for the
whole gateway or, with several policies, for one policy's calls."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field

from alight_server.gateway.container import Gateway
from alight_server.http.deps import AdminDep
from alight_server.policies.versions import bump_metadata, own_version

router = APIRouter(tags=["gateway admin"])


class PauseRequest(BaseModel):  # drain and resume bodies extend it
    model_config = ConfigDict(extra="forbid")
    # Several policies: the one policy whose calls a pause, drain or resume is about; None: every call.
    policy: str | None = Field(default=None, min_length=1, max_length=200)


class DrainRequest(PauseRequest):
    timeout_s: float = Field(default=60.0, gt=0, le=3600)


class ResumeRequest(PauseRequest):
    # The version the upstreams now serve; defaults to one past the current when weights changed.
    policy_version: int | None = Field(default=None, ge=0)
    weights_changed: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)


def _gateway(request: Request) -> Gateway:
    return request.app.state.gateway


def _policy(gw: Gateway, policy: str | None) -> str | None:
    """The policy named, checked against the gateway's routing; a 400 saying what to send instead."""
    if policy is None:
        return None
    routing = gw.config.routing
    if routing is None:
        raise HTTPException(
            400,
            f"policy {policy!r} given, but routing is off: this gateway serves one policy (gateway.routing is "
            "unset); leave out `policy`",
        )
    if policy not in routing.policies:
        raise HTTPException(
            400, f"policy {policy!r} is not one of this gateway's policies ({', '.join(routing.policies)})"
        )
    return policy


def _own_versions(gw: Gateway) -> dict[str, int]:
    """Each routed policy's own version (policy_versions.py); {} with one policy."""
    if gw.config.routing is None:
        return {}
    history = gw.store.list_policy_versions()
    return {name: own_version(history, name) for name in gw.config.routing.policies}


async def _status(gw: Gateway) -> dict[str, Any]:
    targets = await gw.upstreams.targets()
    return {
        "paused": gw.gate.paused,
        "in_flight": gw.gate.in_flight,
        "policy_version": await gw.served_version(),
        "paused_seconds_total": round(gw.gate.paused_seconds(), 3),
        "upstreams": [
            {"id": t.id, "url": t.base_url, "policy_version": t.policy_version, "model": t.model} for t in targets
        ],
        "replica": gw.replicas.id,
        "other_replicas": [r.model_dump() for r in await gw.replicas.others()],
        "paused_policies": gw.gate.paused_policies,
        "in_flight_by_policy": dict(sorted(gw.gate.in_flight_by_policy.items())),
        "own_versions": await anyio.to_thread.run_sync(_own_versions, gw),
    }


@router.post("/api/gateway/pause")
async def pause(request: Request, _: AdminDep, body: PauseRequest | None = None) -> dict[str, Any]:
    """New model calls (of `policy` only, when given) get 429 + Retry-After, on every gateway replica of this
    store; calls in flight run on."""
    gw = _gateway(request)
    await gw.replicas.pause(_policy(gw, (body or PauseRequest()).policy))
    return await _status(gw)


@router.post("/api/gateway/drain")
async def drain(request: Request, _: AdminDep, body: DrainRequest | None = None) -> dict[str, Any]:
    """Wait until no replica has a call (of `policy`, when given) in flight, or `timeout_s` passes. Pause first,
    or calls keep arriving."""
    gw, body = _gateway(request), body or DrainRequest()
    result = await gw.replicas.drain(body.timeout_s, _policy(gw, body.policy))
    return {**dataclasses.asdict(result), "waited_s": round(result.waited_s, 4)}


def _bump(gw: Gateway, body: ResumeRequest) -> int:
    """Advance the stored policy version to what the upstreams now serve; returns it."""
    current = gw.store.current_policy_version()
    if not body.weights_changed:
        if body.policy_version not in (None, current):
            raise HTTPException(
                400,
                f"policy_version {body.policy_version} differs from the current {current} but weights_changed is "
                "false; send weights_changed: true when the upstreams load new weights",
            )
        return current
    target = body.policy_version if body.policy_version is not None else current + 1
    if target < current:
        raise HTTPException(409, f"policy_version {target} is older than the current version {current}")
    metadata = body.metadata if body.policy is None else bump_metadata(body.metadata, body.policy)
    while current < target:
        current = gw.store.add_policy_version(metadata).version
    return current


@router.post("/api/gateway/resume")
async def resume(request: Request, _: AdminDep, body: ResumeRequest | None = None) -> dict[str, Any]:
    """Open the gate (or `policy`'s) again; with `weights_changed` the calls that follow count as the new policy
    version, which with a policy changed only that policy (metadata `policies: [policy]`)."""
    gw, body = _gateway(request), body or ResumeRequest()
    policy = _policy(gw, body.policy)
    version = await anyio.to_thread.run_sync(_bump, gw, body)
    gw.set_served_version(version)
    gw.upstreams.invalidate()  # weight updates usually come with re-registered upstreams
    paused_s = await gw.replicas.resume(policy)
    return {**await _status(gw), "paused_s": round(paused_s, 4)}


@router.get("/api/gateway/status")
async def status(request: Request, _: AdminDep) -> dict[str, Any]:
    # The evaluator too: a trainer against this server checks the rewards it expects will come.
    return {**await _status(_gateway(request)), "evaluator": request.app.state.config.evaluator}


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    """Prometheus text format; unauthenticated like most scrape targets (counts only, no content)."""
    return Response(generate_latest(_gateway(request).metrics.registry), media_type=CONTENT_TYPE_LATEST)
