"""Admin routes for inference upstreams and policy versions."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response

from alight.api_models import PolicyCreate, PolicyState, UpstreamList
from alight.schemas import PolicyVersion, Upstream, UpstreamCreate
from alight_server.http.deps import AdminDep, StoreDep
from alight_server.http.hooks import upstreams_changed
from alight_server.store.keys.upstream import UpstreamKeyError

router = APIRouter(tags=["upstreams"])


@router.post("/upstreams", response_model=Upstream)
def add_upstream(body: UpstreamCreate, request: Request, store: StoreDep, _: AdminDep) -> Upstream:
    """Register an OpenAI-compatible upstream; the same id again replaces it.

    An `api_key` is stored encrypted under the server's ALIGHT_SECRET_KEY; `api_key_env` / `api_key_file`
    store only the reference, and only to a variable or file the server config allows (upstream_key_env,
    upstream_key_dir). No answer ever carries the key.
    """
    try:
        request.app.state.config.key_sources().check(body)
        upstream = store.add_upstream(body)
    except UpstreamKeyError as exc:  # the server cannot keep a key safely: say how to give it another way
        raise HTTPException(422, str(exc)) from None
    upstreams_changed(request.app)  # the gateway routes to it from the next call on
    return upstream


@router.get("/upstreams", response_model=UpstreamList)
def list_upstreams(store: StoreDep, _: AdminDep) -> UpstreamList:
    return UpstreamList(upstreams=store.list_upstreams())


@router.delete("/upstreams/{upstream_id}", status_code=204, response_class=Response)
def remove_upstream(upstream_id: str, request: Request, store: StoreDep, _: AdminDep) -> Response:
    store.remove_upstream(upstream_id)
    upstreams_changed(request.app)
    return Response(status_code=204)


@router.get("/policy", response_model=PolicyState)
def get_policy(store: StoreDep, _: AdminDep) -> PolicyState:
    return PolicyState(current=store.current_policy_version(), versions=store.list_policy_versions())


@router.post("/policy", response_model=PolicyVersion)
def add_policy_version(body: PolicyCreate, store: StoreDep, _: AdminDep) -> PolicyVersion:
    """Record the next policy version (after a training step) and return it."""
    return store.add_policy_version(body.metadata)
