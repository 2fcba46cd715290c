"""The local runner's preloaded starts: one zygote per agent entrypoint, started on first use (zygote.py).

An entrypoint whose zygote cannot start (its import fails, or starts threads) is started the usual way
from then on, with one warning naming the zygote's log: preloading only ever changes how fast an
attempt starts, never whether it runs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from alight.schemas import RunnerSpec

log = logging.getLogger(__name__)

ZYGOTE = str(Path(__file__).with_name("zygote.py"))
READY_TIMEOUT_S = 300.0  # the agent's imports, once: minutes only on a badly overloaded machine


class _Zygote:
    def __init__(self, argv: list[str], cwd: str | None, env: Mapping[str, str], sock: str, log_path: Path) -> None:
        self.sock = sock
        self.log_path = log_path
        with log_path.open("ab") as out:
            self.process = subprocess.Popen(
                argv, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )

    def wait_ready(self) -> bool:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            if Path(self.sock).exists():
                return True
            time.sleep(0.02)
        self.stop()
        return False

    def spawn(self, env: Mapping[str, str], log_file: Path, exit_file: Path) -> int:
        request = {"env": dict(env), "log": str(log_file), "exit_file": str(exit_file)}
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(60)
            conn.connect(self.sock)
            conn.sendall(json.dumps(request).encode() + b"\n")
            reply = json.loads(conn.makefile("r").readline())
        if "pid" not in reply:
            raise OSError(f"the preloaded start refused the attempt: {reply.get('error')}")
        return int(reply["pid"])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # with --die-with it kills its attempts' groups first
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


class Preloader:
    """Zygotes keyed by (entrypoint, cwd, runner env, inherited names); `spawn` returns an attempt leader's pid or None."""

    def __init__(self, python: str, logs_dir: Path, die_with: int | None) -> None:
        self.python = python
        self.logs_dir = logs_dir
        self.die_with = die_with
        self._zygotes: dict[tuple[object, ...], _Zygote | None] = {}  # None: this entrypoint starts unpreloaded
        self._lock = threading.Lock()
        self._sock_dir: str | None = None  # short: a Unix socket path must fit in 108 bytes

    def spawn(
        self, spec: RunnerSpec, env: Mapping[str, str], attempt_env: Mapping[str, str], log_file: Path, exit_file: Path
    ) -> int | None:
        """Start the attempt from its entrypoint's zygote; None when it must be started the usual way."""
        assert spec.entrypoint
        key = (spec.entrypoint, spec.cwd, tuple(sorted(spec.env.items())), tuple(spec.inherit_env))
        with self._lock:
            for _ in range(2):  # a zygote that died since its last attempt is started again, once
                zygote = self._zygote(key, spec, env)
                if zygote is None:
                    return None
                try:
                    return zygote.spawn({**env, **attempt_env}, log_file, exit_file)
                except OSError as exc:
                    log.warning("preloaded start of %s failed (%s); starting its zygote again", spec.entrypoint, exc)
                    zygote.stop()
                    del self._zygotes[key]
            self._zygotes[key] = None
            return None

    def _zygote(self, key: tuple[object, ...], spec: RunnerSpec, env: Mapping[str, str]) -> _Zygote | None:
        if key in self._zygotes:
            return self._zygotes[key]
        if self._sock_dir is None:
            self._sock_dir = tempfile.mkdtemp(prefix="alight-zygote-")
        sock = f"{self._sock_dir}/{len(self._zygotes)}.sock"
        log_path = self.logs_dir / f"zygote-{len(self._zygotes)}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        watch = ["--die-with", str(self.die_with)] if self.die_with is not None else []
        assert spec.entrypoint
        zygote = _Zygote([self.python, ZYGOTE, sock, spec.entrypoint, *watch], spec.cwd, env, sock, log_path)
        ready = zygote.wait_ready()
        if not ready:
            log.warning(
                "cannot preload %s (see %s); its attempts start the usual way", spec.entrypoint, zygote.log_path
            )
        self._zygotes[key] = zygote if ready else None
        return self._zygotes[key]

    def close(self) -> None:
        with self._lock:
            for zygote in self._zygotes.values():
                if zygote is not None:
                    zygote.stop()
            self._zygotes.clear()
            if self._sock_dir is not None:
                shutil.rmtree(self._sock_dir, ignore_errors=True)
                self._sock_dir = None
