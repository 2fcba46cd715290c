"""The fake cluster's HTTP API: the batch/v1 and core/v1 paths the Kubernetes runner uses, in the real JSON shapes.

Lists carry `metadata.resourceVersion`; `?watch=true` streams one JSON event
per line over a chunked response (`ADDED`/`MODIFIED`/`DELETED`, and an
`ERROR` event with a `410 Gone` Status when the requested resourceVersion has
been compacted), ending after `timeoutSeconds` as the real server does.
Errors are `Status` objects with the real reasons (`NotFound`,
`AlreadyExists`, `Invalid`).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

from alight_testing.fake_k8s.objects import ApiError, Obj, ObjectStore

# kind (the URL's resource) -> (URL prefix under /namespaces/{ns}, apiVersion, Kind)
KINDS = {
    "jobs": ("/apis/batch/v1", "batch/v1", "Job"),
    "pods": ("/api/v1", "v1", "Pod"),
    "secrets": ("/api/v1", "v1", "Secret"),
}
DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def status(code: int, reason: str, message: str) -> JSONResponse:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}  # fmt: skip
    return JSONResponse(body, status_code=code)


def validate(kind: str, obj: Obj) -> None:
    """The checks the real API server makes that the runner could get wrong."""
    name = (obj.get("metadata") or {}).get("name") or ""
    limit = 63 if kind == "jobs" else 253  # a Job's name becomes a label value on its Pods
    if not DNS_1123_LABEL.match(name) or len(name) > limit:
        raise ApiError(422, "Invalid", f"metadata.name: Invalid value: {name!r}: a lowercase RFC 1123 label")
    for key, value in ((obj.get("metadata") or {}).get("labels") or {}).items():
        if (
            not isinstance(value, str)
            or len(value) > 63
            or not re.match(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$", value)
        ):
            raise ApiError(422, "Invalid", f"metadata.labels: Invalid value: {value!r} for {key}")
    if kind != "jobs":
        return
    pod_spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    if pod_spec.get("restartPolicy") not in ("Never", "OnFailure"):
        raise ApiError(
            422, "Invalid", 'spec.template.spec.restartPolicy: Unsupported value: must be "Never" or "OnFailure"'
        )
    containers = pod_spec.get("containers") or []
    if not containers or not all(c.get("name") and c.get("image") for c in containers):
        raise ApiError(
            422, "Invalid", "spec.template.spec.containers: Required value: every container needs name and image"
        )


class Cluster(Protocol):
    """What the API serves from (cluster.py's FakeCluster): its objects, namespaces, denials, Pod logs."""

    store: ObjectStore
    namespaces: set[str]
    denied: set[tuple[str, str, str]]
    requests: list[tuple[str, str]]
    watch_generation: int

    def delete(self, kind: str, namespace: str, name: str, propagation: str = "Background") -> Obj: ...

    def log(self, namespace: str, name: str, tail_lines: int | None) -> str: ...


def create_api(cluster: Cluster) -> FastAPI:
    app = FastAPI(title="fake kubernetes")

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return status(exc.code, exc.reason, exc.message)

    @app.middleware("http")
    async def record(request: Request, call_next: Any) -> Any:
        cluster.requests.append((request.method, request.url.path))
        return await call_next(request)

    @app.get("/api/v1/namespaces/{namespace}")
    def read_namespace(namespace: str) -> Obj:
        if namespace not in cluster.namespaces:
            raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found')
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}, "status": {"phase": "Active"}}

    @app.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", status_code=201)
    async def access_review(request: Request) -> Obj:
        review = await request.json()
        attrs = review["spec"]["resourceAttributes"]
        resource = attrs["resource"] + (f"/{attrs['subresource']}" if attrs.get("subresource") else "")
        allowed = (attrs.get("group", ""), resource, attrs["verb"]) not in cluster.denied
        return {**review, "status": {"allowed": allowed, **({} if allowed else {"reason": "no RBAC rule allows it"})}}

    for kind, (prefix, api_version, kind_name) in KINDS.items():
        _register(app, cluster, kind, f"{prefix}/namespaces/{{namespace}}/{kind}", api_version, kind_name)

    @app.get("/api/v1/namespaces/{namespace}/pods/{name}/log")
    def read_log(namespace: str, name: str, tailLines: int | None = None) -> PlainTextResponse:
        return PlainTextResponse(cluster.log(namespace, name, tailLines))

    return app


def _with_kind(obj: Obj, api_version: str, kind_name: str) -> Obj:
    return {"apiVersion": api_version, "kind": kind_name, **obj}


def _register(app: FastAPI, cluster: Cluster, kind: str, path: str, api_version: str, kind_name: str) -> None:
    store = cluster.store

    def check_namespace(namespace: str) -> None:
        if namespace not in cluster.namespaces:
            raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found')

    @app.get(path, name=f"list_{kind}")
    def list_or_watch(
        namespace: str,
        labelSelector: str | None = None,
        watch: bool = False,
        resourceVersion: str | None = None,
        timeoutSeconds: int | None = None,
    ) -> Any:
        if watch:
            # The generation is read now, not when the stream first runs: a drop in between cuts this watch too.
            generation = cluster.watch_generation
            stream = _watch(cluster, kind, namespace, labelSelector, resourceVersion, timeoutSeconds, generation)
            return StreamingResponse(stream, media_type="application/json")
        items, rv = store.list(kind, namespace, labelSelector)
        return {"apiVersion": api_version, "kind": f"{kind_name}List", "metadata": {"resourceVersion": str(rv)},
                "items": items}  # fmt: skip

    @app.post(path, status_code=201, name=f"create_{kind}")
    async def create(namespace: str, request: Request) -> Obj:
        check_namespace(namespace)
        obj = await request.json()
        validate(kind, obj)
        if kind == "secrets" and obj.get("stringData"):  # the API server folds stringData into data
            data = obj.setdefault("data", {})
            for key, value in obj.pop("stringData").items():
                data[key] = base64.b64encode(value.encode()).decode()
        obj.pop("status", None)
        obj.pop("apiVersion", None)
        obj.pop("kind", None)
        return _with_kind(store.create(kind, namespace, obj), api_version, kind_name)

    @app.get(f"{path}/{{name}}", name=f"read_{kind}")
    def read(namespace: str, name: str) -> Obj:
        return _with_kind(store.get(kind, namespace, name), api_version, kind_name)

    @app.delete(f"{path}/{{name}}", name=f"delete_{kind}")
    async def delete(namespace: str, name: str, request: Request, propagationPolicy: str | None = None) -> Obj:
        body = await request.body()
        options = json.loads(body) if body else {}
        propagation = propagationPolicy or options.get("propagationPolicy") or "Background"
        obj = cluster.delete(kind, namespace, name, propagation)
        return _with_kind(obj, api_version, kind_name)


def _watch(
    cluster: Cluster,
    kind: str,
    namespace: str,
    selector: str | None,
    rv_text: str | None,
    timeout_s: int | None,
    generation: int,
) -> Iterator[bytes]:
    """One watch stream, run on the server's thread pool: blocks on the store's condition between events."""
    import time

    store = cluster.store
    _, api_version, kind_name = KINDS[kind]
    deadline = time.monotonic() + (timeout_s if timeout_s is not None else 1800)

    def line(type_: str, obj: Obj) -> bytes:
        return json.dumps({"type": type_, "object": obj}).encode() + b"\n"

    # Never yield while holding the store's lock: each step of this generator may run on another pool thread,
    # and a lock taken on one thread cannot be released on the next (every other client would then hang).
    gone = None
    with store.changed:
        if rv_text in (None, "", "0"):
            # No resourceVersion: the current state as synthetic ADDED events, then changes.
            items, rv = store.list(kind, namespace, selector)
            initial = [line("ADDED", _with_kind(o, api_version, kind_name)) for o in items]
        else:
            rv, initial = int(rv_text), []
            if rv < store.compacted_rv:
                gone = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 410,
                        "reason": "Expired", "message": f"too old resource version: {rv} ({store.compacted_rv})"}  # fmt: skip
    if gone is not None:
        yield line("ERROR", gone)
        return
    yield from initial
    while time.monotonic() < deadline:
        with store.changed:
            if cluster.watch_generation != generation:
                # A cut connection: raising aborts the response without its final chunk.
                raise ConnectionAbortedError("watch dropped by the fake cluster")
            if rv < store.compacted_rv:
                return  # compacted under an open watch: the client resumes and gets its 410
            events = list(store.events_after(rv, kind, namespace, selector))
            if not events:
                store.changed.wait(0.2)
                continue
        for event in events:
            rv = event.rv
            yield line(event.type, _with_kind(event.obj, api_version, kind_name))
