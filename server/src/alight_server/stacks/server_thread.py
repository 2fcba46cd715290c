"""Run an ASGI app with uvicorn on a background thread (embedded stack and tests)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn

from alight_server.gateway.request.arrival import StampedHttp


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class ServerThread:
    """`with ServerThread(app) as url:` serves `app` on a free loopback port until the block ends."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning") -> None:
        self.host = host
        self.port = port or free_port(host)
        # A bounded graceful shutdown: open long-polls (/api/rollouts/wait) must not hold stop() hostage.
        config = uvicorn.Config(
            app,
            host=host,
            port=self.port,
            log_level=log_level,
            lifespan="on",
            timeout_graceful_shutdown=3,
            http=StampedHttp,  # the gateway's response-start metric counts from the accept
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name=f"uvicorn:{self.port}", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> str:
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"server on {self.url} did not start within {timeout_s}s")
            time.sleep(0.01)
        return self.url

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
