"""A server too loaded to answer a rollout wait in time is asked again, not the end of the run."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import httpx
import pytest

from alight.client import AlightClient
from alight_server.trainer.run.rollouts import poll_done


class _SlowWaits(BaseHTTPRequestHandler):
    """Answers /api/rollouts/wait like alight's server, after `delays[i]` seconds for the i-th wait."""

    delays: ClassVar[list[float]] = []
    seen: ClassVar[int] = 0

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        index = type(self).seen
        type(self).seen += 1
        time.sleep(self.delays[index] if index < len(self.delays) else 0.0)
        payload = json.dumps({"done": [], "pending": body["ids"]}).encode()
        try:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up on this one
            pass

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def slow_server() -> Iterator[tuple[str, type[_SlowWaits]]]:
    handler = type("Handler", (_SlowWaits,), {"delays": [], "seen": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def test_a_wait_the_server_answers_too_late_is_asked_again(slow_server: tuple[str, type[_SlowWaits]]) -> None:
    url, handler = slow_server
    handler.delays = [1.5, 1.5, 0.0]  # the client gives up after 0.05 + 0.5 s
    client = AlightClient(url, "key", timeout=0.5)
    assert poll_done(client, ["r1", "r2"], poll_s=0.05) == []
    assert handler.seen == 3


def test_a_server_that_never_answers_in_time_still_fails_the_wait(slow_server: tuple[str, type[_SlowWaits]]) -> None:
    url, handler = slow_server
    handler.delays = [1.5] * 3
    client = AlightClient(url, "key", timeout=0.5)
    with pytest.raises(httpx.ReadTimeout):
        poll_done(client, ["r1"], poll_s=0.05, retries=2)
    assert handler.seen == 3
