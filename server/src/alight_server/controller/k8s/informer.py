"""A list-then-watch mirror of one kind of object (Jobs or Pods) carrying the runner's labels, on its own thread.

How it resumes, re-lists (after `410 Gone`, and periodically) and rides out an unreachable API server:
docs/controller.md, "Watch, not poll". Nothing is concluded from silence: the mirror keeps its last view.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("alight.controller.k8s")

Obj = dict[str, Any]


class Informer:
    """objects: what exists now, by name; gone: last state of objects deleted since they were seen."""

    def __init__(
        self,
        kind: str,
        list_call: Callable[..., Any],
        namespace: str,
        selector: str,
        *,
        relist_s: float = 300.0,
        watch_timeout_s: int = 240,
        backoff_max_s: float = 5.0,
    ) -> None:
        self.kind, self.list_call, self.namespace, self.selector = kind, list_call, namespace, selector
        self.relist_s, self.watch_timeout_s, self.backoff_max_s = relist_s, watch_timeout_s, backoff_max_s
        self.lock = threading.Lock()
        self.objects: dict[str, Obj] = {}
        self.gone: dict[str, Obj] = {}
        self.resource_version: str | None = None
        self.lists = 0  # full lists done (the first, after 410 Gone, and the periodic ones)
        self.resumes = 0  # watches reopened from a kept resourceVersion (after a timeout or a drop)
        self._next_list = 0.0
        self._stop = threading.Event()
        self._watch: Any = None
        self._thread = threading.Thread(target=self._run, name=f"alight-k8s-watch-{kind}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if (watch := self._watch) is not None:
            watch.stop()
        self._thread.join(timeout=5)

    def get(self, name: str) -> Obj | None:
        with self.lock:
            return self.objects.get(name)

    def select(self, label: str, value: str) -> tuple[list[Obj], list[Obj]]:
        """(live, gone) objects whose label `label` is `value`."""
        with self.lock:
            live = [o for o in self.objects.values() if (o["metadata"].get("labels") or {}).get(label) == value]
            gone = [o for o in self.gone.values() if (o["metadata"].get("labels") or {}).get(label) == value]
        return live, gone

    def is_gone(self, name: str) -> bool:
        with self.lock:
            return name in self.gone

    def put(self, obj: Obj) -> None:
        """Record what a create or get just returned, unless the mirror already has something newer."""
        name = obj["metadata"]["name"]
        with self.lock:
            known = self.objects.get(name)
            if known is None or _rv(known) <= _rv(obj):
                self.objects[name] = obj
                self.gone.pop(name, None)

    def mark_gone(self, name: str) -> None:
        """The API says the object does not exist (a direct GET answered 404)."""
        with self.lock:
            if name not in self.objects:
                self.gone.setdefault(name, {"metadata": {"name": name}})

    def forget(self, name: str) -> None:
        with self.lock:
            self.gone.pop(name, None)

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            try:
                if self.resource_version is None or time.monotonic() >= self._next_list:
                    self._list()
                else:
                    self.resumes += 1
                self._watch_once()
                backoff = 0.1
            except Exception as exc:
                if getattr(exc, "status", None) == 410:
                    log.info("watch on %s expired (410 Gone); listing again", self.kind)
                    self.resource_version = None
                    continue
                log.warning("watch on %s interrupted, resuming in %.1fs: %s", self.kind, backoff, _short(exc))
                if self._stop.wait(backoff):
                    return
                backoff = min(backoff * 2, self.backoff_max_s)

    def _list(self) -> None:
        response = self.list_call(self.namespace, label_selector=self.selector, _preload_content=False)
        body = json.loads(response.data)
        listed = {o["metadata"]["name"]: o for o in body.get("items") or []}
        version = body["metadata"]["resourceVersion"]
        with self.lock:
            for name, obj in self.objects.items():
                if name in listed:
                    continue
                if _rv(obj) > _rv({"metadata": {"resourceVersion": version}}):
                    listed[name] = obj  # put() there after this list was taken: newer than the list
                else:
                    self.gone[name] = obj  # deleted while no watch saw it
            self.objects = listed
            self.resource_version = version
        self.lists += 1
        self._next_list = time.monotonic() + self.relist_s

    def _watch_once(self) -> None:
        from kubernetes import watch

        self._watch = watch.Watch()
        timeout = min(self.watch_timeout_s, max(1, int(self._next_list - time.monotonic())))
        stream = self._watch.stream(
            self.list_call,
            self.namespace,
            label_selector=self.selector,
            resource_version=self.resource_version,
            timeout_seconds=timeout,
            allow_watch_bookmarks=True,
            _request_timeout=(5, timeout + 10),  # a silent, half-open connection ends too
        )
        for event in stream:
            if self._stop.is_set():
                break
            # raw_object: the JSON as sent (the client's deserialize=False path cannot read ERROR events)
            self._apply(event["type"], event["raw_object"])

    def _apply(self, type_: str, obj: Obj) -> None:
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        with self.lock:
            if type_ in ("ADDED", "MODIFIED"):
                self.objects[obj["metadata"]["name"]] = obj
                self.gone.pop(obj["metadata"]["name"], None)
            elif type_ == "DELETED":
                self.objects.pop(obj["metadata"]["name"], None)
                self.gone[obj["metadata"]["name"]] = obj
            if rv:
                self.resource_version = rv


def _rv(obj: Obj) -> int:
    try:
        return int(obj["metadata"].get("resourceVersion") or 0)
    except ValueError:
        return 0  # resourceVersions are opaque; this is only a tie-breaker for put()


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
