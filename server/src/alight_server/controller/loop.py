"""The controller: a reconcile loop that claims attempts from the server, runs them, and reports how they ended.

Each tick, against the server's HTTP API only (never the store):
  1. On the first tick, recover: adopt the attempts a previous controller left running (the runner still holds
     them), and fail as `infra` the server's running attempts that carry this runner's handle but no runner holds.
  2. Watch the server's view of the attempts we run: one cancelled (or ended by anyone else) is killed and not
     reported again.
  3. Poll each attempt: past its deadline it is killed and reported as `timeout`; once ended, its log tail is
     uploaded as a `log` event (and what it ran, where the runner says, as an `image` event) and the outcome is
     reported (`succeeded`, or `failed` with kind task|infra|timeout). An unacknowledged report is retried next tick.
  4. Claim up to `concurrency - running` new attempts and start them.

Every step is idempotent (deterministic handles, event ids, finish outcomes), so a tick that dies halfway and runs
again does nothing twice.
"""

from __future__ import annotations

import hashlib
import logging
import signal
import threading
import time
from dataclasses import dataclass

import httpx

from alight.attempt_logs import LOG_EVENT_KIND
from alight.client import AlightClient, ApiError
from alight.schemas import AttemptFinish, AttemptStart, EventCreate, FailureKind
from alight_server.controller import outcome, recovery
from alight_server.controller.base import Runner, SpawnError

log = logging.getLogger("alight.controller")

IMAGE_EVENT_KIND = "image"  # what an attempt ran (Runner.launched): images, digests, scans
LOG_TAIL_BYTES = 64 * 1024  # of an ended attempt's output, uploaded as its `log` event


@dataclass
class _Attempt:
    """One attempt this controller is responsible for, until the server has its outcome."""

    rollout_id: str
    attempt: int
    handle: str
    timeout_s: float
    deadline: float  # wall clock: adoption keeps the original start
    stop_kind: FailureKind | None = None  # why *we* killed it, which outranks its exit code
    stop_message: str | None = None
    report: bool = True  # False once the server ended it by itself (cancel)
    finish: AttemptFinish | None = None  # the decided outcome, kept until the server acknowledged it
    log_uploaded: bool = False


def log_event_id(rollout_id: str, attempt: int, kind: str = "log") -> str:
    """Deterministic, so re-uploading a log after a crash is a no-op on the server."""
    digest = hashlib.sha256(rollout_id.encode()).hexdigest()[:16]
    return f"{kind}-{digest}-{attempt}"


class Controller:
    """Runs the server's queued attempts on `runner`, at most `concurrency` at a time.

    Use `run()` as a process's main loop, or `start()` / `stop()` to run it on a thread.
    """

    def __init__(
        self,
        client: AlightClient,
        runner: Runner,
        concurrency: int = 4,
        poll_interval: float = 0.5,
        *,
        kill_grace_s: float = 5.0,
        watch_interval: float = 1.0,
        kill_on_stop: bool = True,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.client = client
        self.runner = runner
        self.concurrency = concurrency
        self.poll_interval = poll_interval
        self.kill_grace_s = kill_grace_s
        # Cancellation checks ask the server (polls are local), so they run less often.
        self.watch_interval = watch_interval
        self._next_watch = 0.0
        self._attempts: dict[str, _Attempt] = {}  # by handle
        self._recovered = False
        self._stop = threading.Event()
        # True: stopping kills the agents and reports them as infra (retried later).
        # False: they keep running and the next controller on the same runner state adopts them.
        self.kill_on_stop = kill_on_stop
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> list[tuple[str, int]]:
        """(rollout id, attempt) of every attempt this controller holds."""
        return [(a.rollout_id, a.attempt) for a in list(self._attempts.values())]  # a copy: the loop thread mutates

    def start(self) -> Controller:
        """Run the loop on a daemon thread (the embedded stack in `alight train`)."""
        self._thread = threading.Thread(target=self.run, name="alight-controller", daemon=True)
        self._thread.start()
        return self

    def stop(self, kill_running: bool | None = None, timeout_s: float | None = None) -> None:
        """End the loop; kill_running overrides `kill_on_stop` for this stop."""
        if kill_running is not None:
            self.kill_on_stop = kill_running
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s if timeout_s is not None else self.kill_grace_s + 30)

    def run(self) -> None:
        """Reconcile until stop() (or SIGTERM/SIGINT when this is the main thread)."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self._stop.set())
        while not self._stop.is_set():
            self._safe_tick()
            self._stop.wait(self.poll_interval)
        if self.kill_on_stop:
            self._drain()

    def _safe_tick(self) -> None:
        try:
            self.tick()
        except Exception:
            # A long-lived controller outlives one bad tick; the next one starts from the same state.
            log.exception("controller tick failed")

    def tick(self) -> None:
        """One reconcile pass; a server that cannot be reached just makes it a short one."""
        try:
            if not self._recovered:
                self._recovered = self._recover()
            self._watch()
            for attempt in list(self._attempts.values()):
                self._check(attempt)
            if not self._stop.is_set():
                self._claim()
        except (httpx.TransportError, ApiError) as exc:
            log.warning("controller tick cut short, retrying next tick: %s", exc)

    def _drain(self) -> None:
        """Kill everything still running and report it as infra (retried by whoever claims next)."""
        for attempt in self._attempts.values():
            if attempt.stop_kind is None and attempt.finish is None:
                self.runner.kill(attempt.handle, self.kill_grace_s)
                attempt.stop_kind = FailureKind.INFRA
                attempt.stop_message = "the controller stopped while the attempt ran"
        deadline = time.monotonic() + self.kill_grace_s + 5
        while self._attempts and time.monotonic() < deadline:
            self._safe_tick()
            time.sleep(min(self.poll_interval, 0.1))

    # 1. recovery

    def _recover(self) -> bool:
        """True once everything an earlier controller left is adopted, forgotten or reported."""
        for left in recovery.leftovers(self.client, self.runner, skip=self._attempts):
            if not left.running_on_server or left.rollout is None:
                # The server already ended it (cancelled meanwhile): stop the process and forget it quietly.
                self._attempts[left.handle] = _Attempt(left.rollout_id, left.attempt, left.handle, 0, 0, report=False)
                self.runner.kill(left.handle, 0.0)
                continue
            status = self.runner.poll(left.handle)
            timeout_s = left.rollout.timeout_s
            deadline = (status.started_at or time.time()) + timeout_s  # the original deadline, not a fresh one
            self._attempts[left.handle] = _Attempt(left.rollout_id, left.attempt, left.handle, timeout_s, deadline)
            log.info("adopted attempt rollout_id=%s attempt=%d phase=%s", left.rollout_id, left.attempt, status.phase)
        reported = True
        for rollout_id, attempt, finish in recovery.orphans(self.client, self.runner.name, held=self._attempts):
            reported = self._report(rollout_id, attempt, finish) and reported
        return reported

    # 2. watch for cancellation

    def _watch(self) -> None:
        live = [a for a in self._attempts.values() if a.report and a.finish is None]
        if not live or time.monotonic() < self._next_watch:
            return
        self._next_watch = time.monotonic() + self.watch_interval
        # One request per 1000: a zero-timeout wait answers which are already final.
        ids = [a.rollout_id for a in live]
        ended = {r.id for i in range(0, len(ids), 1000) for r in self.client.wait_rollouts(ids[i : i + 1000], 0).done}
        for attempt in (a for a in live if a.rollout_id in ended):
            # Final while its attempt still runs here: cancelled. The server ended the attempt; we stop it.
            attempt.report = False
            if attempt.stop_kind is None:
                self.runner.kill(attempt.handle, self.kill_grace_s)
                log.info("killing cancelled attempt rollout_id=%s attempt=%d", attempt.rollout_id, attempt.attempt)

    # 3. poll, time out, report

    def _check(self, attempt: _Attempt) -> None:
        if attempt.finish is None:
            status = self.runner.poll(attempt.handle)
            if not status.ended:
                if attempt.stop_kind is None and attempt.report and time.time() >= attempt.deadline:
                    self.runner.kill(attempt.handle, self.kill_grace_s)
                    attempt.stop_kind = FailureKind.TIMEOUT
                    attempt.stop_message = f"killed after the rollout's timeout of {attempt.timeout_s:g}s"
                    log.info("attempt timed out rollout_id=%s attempt=%d", attempt.rollout_id, attempt.attempt)
                return
            stopped = (attempt.stop_kind, attempt.stop_message or "stopped") if attempt.stop_kind else None
            attempt.finish = outcome.decide(
                status,
                attempt.handle,
                stopped,
                lambda max_bytes: self.runner.log_tail(attempt.handle, max_bytes),
                lambda: self.runner.withheld_env(attempt.handle),
            )
        if not attempt.log_uploaded:
            self._upload_log(attempt)
        if attempt.report and not self._report(attempt.rollout_id, attempt.attempt, attempt.finish):
            return  # not acknowledged: keep it, report again next tick
        self.runner.release(attempt.handle)
        del self._attempts[attempt.handle]

    def _upload_log(self, attempt: _Attempt) -> None:
        text = self.runner.log_tail(attempt.handle, LOG_TAIL_BYTES)
        launched = self.runner.launched(attempt.handle)
        uploads = [(LOG_EVENT_KIND, {"text": text, "handle": attempt.handle, "max_bytes": LOG_TAIL_BYTES})]
        uploads += [(IMAGE_EVENT_KIND, launched)] if launched is not None else []
        for kind, payload in uploads:
            event_id = log_event_id(attempt.rollout_id, attempt.attempt, kind)
            event = EventCreate(id=event_id, attempt=attempt.attempt, kind=kind, payload=payload)
            try:
                self.client.add_event(attempt.rollout_id, event)
            except ApiError as exc:
                # 4xx: the rollout is gone or refuses events; the log stays on local disk.
                log.warning("%s upload refused rollout_id=%s attempt=%d: %s", kind, attempt.rollout_id,
                            attempt.attempt, exc)  # fmt: skip
        attempt.log_uploaded = True

    def _report(self, rollout_id: str, attempt: int, finish: AttemptFinish) -> bool:
        """True once the server holds the outcome (or can never take it)."""
        try:
            self.client.finish_attempt(rollout_id, attempt, finish)
        except httpx.TransportError as exc:
            log.warning("cannot reach the server to finish rollout_id=%s attempt=%d: %s", rollout_id, attempt, exc)
            return False
        except ApiError as exc:
            if exc.status_code >= 500:
                return False
            # 404/409: deleted, or already ended another way (cancelled): nothing left to tell it.
            log.info("finish not applied rollout_id=%s attempt=%d: %s", rollout_id, attempt, exc)
            return True
        log.info(
            "attempt finished rollout_id=%s attempt=%d outcome=%s kind=%s",
            rollout_id,
            attempt,
            finish.status,
            finish.failure_kind,
        )
        return True

    # 4. claim and start

    def _claim(self) -> None:
        free = self.concurrency - len(self._attempts)
        if free <= 0:
            return
        for start in self.client.claim_attempts(limit=free, runner=self.runner.name):
            self._launch(start)

    def _launch(self, start: AttemptStart) -> None:
        rollout = start.rollout
        handle = self.runner.handle_for(rollout.id, start.attempt)
        attempt = _Attempt(rollout.id, start.attempt, handle, rollout.timeout_s, time.time() + rollout.timeout_s)
        self._attempts[handle] = attempt
        # The claim recorded the handle before the process exists: a controller that dies in between
        # leaves a handle that recovery recognises as its own and fails, not a rollout running forever.
        try:
            self.runner.start(start)
        except SpawnError as exc:
            attempt.finish = AttemptFinish(
                status="failed", failure_kind=FailureKind.INFRA, message=str(exc), runner_handle=handle
            )
            attempt.log_uploaded = True  # nothing ran, nothing to upload
            log.warning("attempt failed to start rollout_id=%s attempt=%d: %s", rollout.id, start.attempt, exc)
            return
        log.info("attempt started rollout_id=%s attempt=%d handle=%s", rollout.id, start.attempt, handle)
