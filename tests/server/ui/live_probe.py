"""What a user sees while `alight train` runs: the run's own dashboard, and a second `alight serve` on its store.

The probe runs on a thread beside the dashboard fixture's training run. It reads the dashboard line the
trainer prints at start (the run page's URL and the file holding the admin key), and, from then on,
polls that server until it shows the run `running`. Meanwhile a second server, a real `alight serve
--db <run>/alight.db` subprocess with a key of its own, reads the same SQLite file while the trainer writes it.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from alight_server.stacks.server_thread import free_port

LINE = re.compile(r"dashboard, live while this run trains: (?P<url>\S+) · admin key: \"admin_key\" in (?P<file>\S+)")
SECOND_KEY = "alk_second-server-key"


class Tee(io.TextIOBase):
    """stderr as it was, plus a copy the probe reads."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.copy = io.StringIO()
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            self.copy.write(text)
        return self.target.write(text)

    def flush(self) -> None:
        self.target.flush()

    def text(self) -> str:
        with self.lock:
            return self.copy.getvalue()


@dataclass
class LiveView:
    """What the probe saw; `errors` says what it could not see, for the tests' messages."""

    printed: str | None = None  # the dashboard line
    page_url: str | None = None
    key_file: Path | None = None
    page_html: str | None = None
    own: dict[str, Any] | None = None  # /api/ui/runs/{id}/curves from the run's own server, while running
    second: dict[str, Any] | None = None  # the same route from the second `alight serve`, while running
    errors: list[str] = field(default_factory=list)


class LiveProbe(threading.Thread):
    def __init__(self, stderr: Tee, db: Path, timeout_s: float = 300.0) -> None:
        super().__init__(name="dashboard-live-probe", daemon=True)
        self.stderr = stderr
        self.db = db
        self.deadline = time.monotonic() + timeout_s
        self.done = threading.Event()  # the training run has returned
        self.view = LiveView()
        self.second: subprocess.Popen[bytes] | None = None

    def run(self) -> None:
        try:
            self._probe()
        except Exception as exc:  # reported by the tests, not lost on a thread
            self.view.errors.append(f"{type(exc).__name__}: {exc}")

    def stop(self) -> LiveView:
        self.done.set()
        self.join(timeout=30)
        if self.second is not None:
            self.second.terminate()
            self.second.wait(timeout=30)
        return self.view

    def _waiting(self) -> bool:
        return not self.done.is_set() and time.monotonic() < self.deadline

    def _probe(self) -> None:
        found = LINE.search(self.stderr.text())
        while found is None and self._waiting():
            time.sleep(0.1)
            found = LINE.search(self.stderr.text())
        if found is None:
            self.view.errors.append(f"the trainer printed no dashboard line; stderr: {self.stderr.text()[-2000:]!r}")
            return
        view = self.view
        page_url, key_file = found.group("url"), Path(found.group("file"))
        view.printed, view.page_url, view.key_file = found.group(0), page_url, key_file
        key = json.loads(key_file.read_text())["admin_key"]
        base, _, fragment = page_url.partition("/ui/#/run/")
        second_url = self._start_second_server()
        with (
            httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as own,
            httpx.Client(base_url=second_url, headers={"Authorization": f"Bearer {SECOND_KEY}"}, timeout=120) as other,
        ):
            view.page_html = own.get("/ui/").text
            while self._waiting() and (view.own is None or view.second is None):
                view.own = view.own or _while_training(own, fragment)
                view.second = view.second or _while_training(other, fragment)
                time.sleep(0.5)
        if view.own is None or view.second is None:
            view.errors.append("the run finished before both servers showed it training")

    def _start_second_server(self) -> str:
        port = free_port()
        env = {**os.environ, "ALIGHT_ADMIN_KEY": SECOND_KEY}
        command = [sys.executable, "-m", "alight", "serve", "--db", str(self.db), "--port", str(port)]
        self.second = subprocess.Popen([*command, "--log-level", "warning"], env=env)
        return f"http://127.0.0.1:{port}"


def _while_training(client: httpx.Client, run_id: str) -> dict[str, Any] | None:
    """The run's curves as this server serves them, once it shows the run running (the trainer has reported it)."""
    try:
        response = client.get(f"/api/ui/runs/{run_id}/curves")
    except httpx.TransportError:
        return None  # not up yet
    if response.status_code != 200:
        return None  # 404 until the trainer has reported the run
    curves = response.json()
    return curves if curves["run"]["status"] == "running" else None
