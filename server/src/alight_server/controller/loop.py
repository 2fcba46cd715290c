"""The controller: a reconcile loop that claims attempts from the server, runs them, and reports how they ended.

Each tick, against the server's HTTP API only (never the store):
  1. On the first tick, recover: adopt the attempts a previous controller left
     running (the runner still holds them), and fail as `infra` the server's
     running attempts that carry this runner's handle but that no runner holds.
  2. Watch the server's view of the attempts we run: one cancelled (or ended
     by anyone else) is killed and not reported again.
  3. Poll each attempt: past its deadline it is killed and reported as
     `timeout`; once ended, its log tail is uploaded as a `log` event and the
     outcome is reported (`succeeded`, or `failed` with kind task|infra|timeout).
     A report the server did not acknowledge is retried next tick.
  4. Claim up to `concurrency - running` new attempts and start them.

Every step is idempotent (deterministic handles, event ids, finish outcomes),
so a tick that dies halfway and runs again does nothing twice.
"""

from __future__ import annotations

import hashlib
import logging
import signal
import threading
import time
from dataclasses import dataclass

import httpx

from alight.client import AlightClient, ApiError
from alight.schemas import AttemptFinish, AttemptStart, AttemptStatus, EventCreate, FailureKind, Rollout, RolloutState
from alight_server.controller.base import Runner, RunPhase, RunStatus, SpawnError, parse_handle

log = logging.getLogger("alight.controller")

LOG_EVENT_KIND = "log"
MESSAGE_TAIL_CHARS = 2000  # of the log, quoted in a failed attempt's message


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


def log_event_id(rollout_id: str, attempt: int) -> str:
    """Deterministic, so re-uploading a log after a crash is a no-op on the server."""
    digest = hashlib.sha256(rollout_id.encode()).hexdigest()[:16]
    return f"log-{digest}-{attempt}"


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
        log_tail_bytes: int = 64 * 1024,
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
        self.log_tail_bytes = log_tail_bytes
        # Cancellation checks cost one request per running attempt, so they run less often than polls.
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
        return [(a.rollout_id, a.attempt) for a in self._attempts.values()]

    # lifecycle

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
            try:
                self.tick()
            except Exception:
                # A long-lived controller outlives one bad tick; the next one starts from the same state.
                log.exception("controller tick failed")
            self._stop.wait(self.poll_interval)
        if self.kill_on_stop:
            self._drain()

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
            self.tick()
            time.sleep(min(self.poll_interval, 0.1))

    # 1. recovery

    def _recover(self) -> bool:
        """True once everything a previous controller left is adopted or reported."""
        held = {h: parse_handle(h) for h in self.runner.handles() if h not in self._attempts}
        server = self._rollouts([rid for _, rid, _ in held.values()])
        for handle, (_, rollout_id, number) in held.items():
            rollout = server.get(rollout_id)
            current = _attempt_of(rollout, number)
            if rollout is None or current is None or current.status is not AttemptStatus.RUNNING:
                # The server already ended it: stop the process (if any) and forget it quietly.
                self._attempts[handle] = _Attempt(rollout_id, number, handle, 0.0, 0.0, report=False)
                self.runner.kill(handle, 0.0)
                continue
            status = self.runner.poll(handle)
            started = status.started_at or time.time()
            self._attempts[handle] = _Attempt(
                rollout_id, number, handle, rollout.timeout_s, started + rollout.timeout_s
            )
            log.info("adopted attempt rollout_id=%s attempt=%d phase=%s", rollout_id, number, status.phase)
        # Running on the server under our name, held by no runner: started by a controller that died
        # before it could record the process. Nothing will ever finish them unless we do.
        prefix = f"{self.runner.name}/"
        reported = True
        for rollout in self._all_running():
            current = _attempt_of(rollout, rollout.attempts[-1].attempt if rollout.attempts else 0)
            if current is None or current.status is not AttemptStatus.RUNNING:
                continue
            handle = current.runner_handle
            if handle and handle.startswith(prefix) and handle not in self._attempts:
                finish = AttemptFinish(
                    status="failed",
                    failure_kind=FailureKind.INFRA,
                    message=f"{self.runner.name} has no record of {handle}: its controller stopped before it started",
                    runner_handle=handle,
                )
                reported = self._report(rollout.id, current.attempt, finish) and reported
        return reported

    def _all_running(self) -> list[Rollout]:
        found: list[Rollout] = []
        since = 0
        while True:
            page = self.client.list_rollouts(state=RolloutState.RUNNING, since_seq=since, limit=500)
            found.extend(page)
            if len(page) < 500:
                return found
            since = page[-1].seq

    def _rollouts(self, ids: list[str]) -> dict[str, Rollout]:
        """The server's current view of these rollouts (missing ones are absent)."""
        out: dict[str, Rollout] = {}
        for rollout_id in dict.fromkeys(ids):
            try:
                out[rollout_id] = self.client.get_rollout(rollout_id)
            except ApiError as exc:
                if exc.status_code != 404:
                    raise
        return out

    # 2. watch for cancellation

    def _watch(self) -> None:
        live = [a for a in self._attempts.values() if a.report and a.finish is None]
        if not live or time.monotonic() < self._next_watch:
            return
        self._next_watch = time.monotonic() + self.watch_interval
        # One request for all of them: a zero-timeout wait answers which are already final.
        ended = {r.id for r in self.client.wait_rollouts([a.rollout_id for a in live], timeout_s=0).done}
        for attempt in live:
            if attempt.rollout_id not in ended:
                continue
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
            attempt.finish = self._outcome(attempt, status)
        if not attempt.log_uploaded:
            self._upload_log(attempt)
        if attempt.report and not self._report(attempt.rollout_id, attempt.attempt, attempt.finish):
            return  # not acknowledged: keep it, report again next tick
        self.runner.release(attempt.handle)
        del self._attempts[attempt.handle]

    def _outcome(self, attempt: _Attempt, status: RunStatus) -> AttemptFinish:
        def failed(kind: FailureKind, message: str) -> AttemptFinish:
            return AttemptFinish(
                status="failed",
                failure_kind=kind,
                exit_code=status.exit_code,
                message=message,
                runner_handle=attempt.handle,
            )

        if attempt.stop_kind is not None:
            return failed(attempt.stop_kind, attempt.stop_message or "stopped by the controller")
        if status.phase in (RunPhase.FAILED_TO_START, RunPhase.LOST):
            return failed(FailureKind.INFRA, status.message or str(status.phase))
        if status.exit_code == 0:
            return AttemptFinish(status="succeeded", exit_code=0, runner_handle=attempt.handle)
        if status.exit_code == -signal.SIGKILL:
            # Nobody here sent it: the kernel's out-of-memory killer, most likely. Not the agent's fault.
            return failed(FailureKind.INFRA, "the agent was killed by SIGKILL from outside (out of memory?)")
        tail = self.runner.log_tail(attempt.handle, MESSAGE_TAIL_CHARS).strip()
        return failed(
            FailureKind.TASK, f"agent exited with code {status.exit_code}" + (f"; last output:\n{tail}" if tail else "")
        )

    def _upload_log(self, attempt: _Attempt) -> None:
        text = self.runner.log_tail(attempt.handle, self.log_tail_bytes)
        event = EventCreate(
            id=log_event_id(attempt.rollout_id, attempt.attempt),
            attempt=attempt.attempt,
            kind=LOG_EVENT_KIND,
            payload={"text": text, "handle": attempt.handle, "max_bytes": self.log_tail_bytes},
        )
        try:
            self.client.add_event(attempt.rollout_id, event)
        except ApiError as exc:
            # 4xx: the rollout is gone or refuses events; the log stays on local disk.
            log.warning("log upload refused rollout_id=%s attempt=%d: %s", attempt.rollout_id, attempt.attempt, exc)
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
        for start in self.client.claim_attempts(limit=free):
            self._launch(start)

    def _launch(self, start: AttemptStart) -> None:
        rollout = start.rollout
        handle = self.runner.handle_for(rollout.id, start.attempt)
        attempt = _Attempt(rollout.id, start.attempt, handle, rollout.timeout_s, time.time() + rollout.timeout_s)
        self._attempts[handle] = attempt
        try:
            # Recorded before the process exists: a controller that dies in between leaves a handle
            # that recovery recognises as its own and fails, instead of a rollout running forever.
            self.client.set_runner_handle(rollout.id, start.attempt, handle)
        except (httpx.TransportError, ApiError) as exc:
            log.warning("could not record runner handle %s: %s", handle, exc)
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


def _attempt_of(rollout: Rollout | None, number: int):
    if rollout is None:
        return None
    return next((a for a in rollout.attempts if a.attempt == number), None)
