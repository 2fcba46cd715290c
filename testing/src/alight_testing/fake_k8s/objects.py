"""The fake cluster's object store: namespaced objects with uids, resourceVersions, an event log and label selectors.

Every write bumps one cluster-wide resourceVersion and appends a watch event
(`ADDED`, `MODIFIED`, `DELETED` with a snapshot of the object), as etcd and
the API server do. `compact()` forgets the log up to now, so a watch that
resumes from an older resourceVersion gets `410 Gone`, as after etcd
compaction.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]


def now_rfc3339() -> str:
    """Kubernetes timestamps: RFC 3339, UTC, whole seconds."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiError(Exception):
    """An API-server error answer: HTTP code, Status reason and message."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def matches(selector: str | None, labels: dict[str, str]) -> bool:
    """Equality-based label selectors: `k=v`, `k==v`, `k!=v`, `k`, `!k`, comma-separated (all must hold)."""
    for term in (t.strip() for t in (selector or "").split(",")):
        if not term:
            continue
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


@dataclass(frozen=True)
class Event:
    rv: int
    kind: str
    type: str  # ADDED | MODIFIED | DELETED
    obj: Obj


class ObjectStore:
    """Objects by (kind, namespace, name); one lock (a Condition) guards everything, watchers wait on it."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.rv = 0
        self.compacted_rv = 0  # events at or below this are gone from the log
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.events: list[Event] = []

    def _record(self, kind: str, type_: str, obj: Obj) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.events.append(Event(self.rv, kind, type_, copy.deepcopy(obj)))
        self.changed.notify_all()

    def create(self, kind: str, namespace: str, obj: Obj) -> Obj:
        with self.changed:
            meta = obj.setdefault("metadata", {})
            name = meta.get("name") or ""
            key = (kind, namespace, name)
            if key in self.objects:
                raise ApiError(409, "AlreadyExists", f'{kind} "{name}" already exists')
            meta.update(namespace=namespace, uid=str(uuid.uuid4()), creationTimestamp=now_rfc3339())
            meta.setdefault("labels", {})
            self.objects[key] = obj
            self._record(kind, "ADDED", obj)
            return copy.deepcopy(obj)

    def get(self, kind: str, namespace: str, name: str) -> Obj:
        with self.changed:
            obj = self.objects.get((kind, namespace, name))
            if obj is None:
                raise ApiError(404, "NotFound", f'{kind} "{name}" not found')
            return copy.deepcopy(obj)

    def list(self, kind: str, namespace: str, selector: str | None = None) -> tuple[list[Obj], int]:
        with self.changed:
            items = [copy.deepcopy(o) for (k, ns, _), o in self.objects.items() if k == kind and ns == namespace]
            return [o for o in items if matches(selector, o["metadata"]["labels"])], self.rv

    def update(self, kind: str, namespace: str, name: str, mutate: Callable[[Obj], None]) -> Obj | None:
        """Apply `mutate` to the stored object and record MODIFIED; None when it no longer exists."""
        with self.changed:
            obj = self.objects.get((kind, namespace, name))
            if obj is None:
                return None
            mutate(obj)
            self._record(kind, "MODIFIED", obj)
            return copy.deepcopy(obj)

    def remove(self, kind: str, namespace: str, name: str) -> Obj | None:
        """Take the object out of the store now (no grace, no finalizers) and record DELETED."""
        with self.changed:
            obj = self.objects.pop((kind, namespace, name), None)
            if obj is not None:
                self._record(kind, "DELETED", obj)
            return copy.deepcopy(obj) if obj is not None else None

    def all(self, kind: str) -> list[Obj]:
        with self.changed:
            return [copy.deepcopy(o) for (k, _, _), o in self.objects.items() if k == kind]

    def uids(self) -> set[str]:
        with self.changed:
            return {o["metadata"]["uid"] for o in self.objects.values()}

    def compact(self) -> None:
        with self.changed:
            self.compacted_rv = self.rv
            self.events.clear()

    def events_after(self, rv: int, kind: str, namespace: str, selector: str | None) -> Iterator[Event]:
        """Events newer than rv for this kind and namespace whose object matches the selector. Caller holds the lock."""
        for event in self.events:
            meta = event.obj["metadata"]
            ours = event.rv > rv and event.kind == kind and meta["namespace"] == namespace
            if ours and matches(selector, meta.get("labels") or {}):
                yield event


def owned_by(obj: Obj, uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])
