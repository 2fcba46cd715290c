"""A progress line for a log: every few seconds the current phase, rollouts done of total, and the time so far.

In a pipe or a log file rich's bar prints nothing until the end, so a run would look hung for minutes; there
the heartbeat prints `[0:02:30] validation before training: 37/64 rollouts done, 27 running, 0 failed`."""

from __future__ import annotations

import os
import threading
import time

from rich.console import Console

# A log shows progress at least this often. ALIGHT_HEARTBEAT_S overrides it (a test asks for 0.5 s).
HEARTBEAT_S = 20.0
HEARTBEAT_ENV = "ALIGHT_HEARTBEAT_S"


def heartbeat_interval() -> float:
    """Seconds between progress lines: ALIGHT_HEARTBEAT_S when set, else HEARTBEAT_S."""
    text = os.environ.get(HEARTBEAT_ENV, "").strip()
    if not text:
        return HEARTBEAT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0:
        raise ValueError(f"{HEARTBEAT_ENV}={text!r}: expected the seconds between progress lines, e.g. 30")
    return seconds


class Heartbeat:
    """Prints `[elapsed] status` on `console` every `interval_s` seconds between `start()` and `stop()`."""

    def __init__(self, console: Console, interval_s: float | None = None) -> None:
        self.console = console
        self.interval_s = heartbeat_interval() if interval_s is None else interval_s
        self.status = "starting"  # what is running now, with its counts; set by whoever runs it
        self._started = time.monotonic()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="alight-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()

    def line(self) -> str:
        whole = int(time.monotonic() - self._started)  # h:mm:ss, as rich's bar shows elapsed time
        return f"[{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}] {self.status}"

    def _beat(self) -> None:
        while not self._stopped.wait(self.interval_s):
            # markup off: a status is plain text, and "[0:00:30]" must print as it is
            self.console.print(self.line(), markup=False, highlight=False, soft_wrap=True)
