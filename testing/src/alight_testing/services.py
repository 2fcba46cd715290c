"""alight's services started for tests the way a user starts them: each its own process group, each waited for."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from alight_server.stacks.server_thread import free_port

BIN = Path(sys.executable).parent  # where `alight` is installed next to this Python


@contextmanager
def process(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run argv with its output in `log`; SIGTERM its process group (then SIGKILL) at the end."""
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield proc
        finally:
            stop(proc)


def stop(proc: subprocess.Popen[bytes], timeout_s: float = 20.0) -> None:
    """SIGTERM the process group, SIGKILL it if it lingers."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 120.0) -> None:
    """Until `url` answers 200; AssertionError with the log's tail if the process ends or time runs out.

    One client for all the tries: `httpx.get` builds a client (and its TLS context) per call, ~20 ms of CPU each."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2) as client:
        while True:
            try:
                if client.get(url).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{url} did not come up:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)


@dataclass(frozen=True)
class Services:
    server: str  # `alight serve`'s base URL
    inference: str  # the inference server's base URL (its OpenAI API under /v1)
    admin: dict[str, str]  # the server's admin Authorization header
    inference_auth: dict[str, str]  # the Authorization header the inference server's /v1 opens with


@contextmanager
def served_tiny_model(folder: Path, admin_key: str, inference_key: str) -> Iterator[Services]:
    """`alight serve` and an inference server for the tiny model, with it registered as the policy upstream.

    As docs/training.md starts them: two processes, logs in `folder/serve.log` and `folder/inference.log`.
    The inference server generates its API key into folder/keys, the one folder the server reads upstream
    keys from, and the upstream is registered with that file.
    """
    server, inference = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    keys = folder / "keys"
    serve = [str(BIN / "alight"), "serve", "--port", server.rsplit(":", 1)[1], "--db", str(folder / "srv.db"),
             "--admin-key", admin_key, "--log-level", "warning", "--upstream-key-dir", str(keys)]  # fmt: skip
    model_server = [sys.executable, "-m", "alight_server.inference", "--model", "tiny", "--device", "cpu",
                    "--port", inference.rsplit(":", 1)[1], "--threads", "1", "--admin-key", inference_key,
                    "--key-dir", str(keys)]  # fmt: skip
    admin = {"Authorization": f"Bearer {admin_key}"}
    with ExitStack() as stack:
        serving = stack.enter_context(process(serve, folder / "serve.log"))
        serving_model = stack.enter_context(process(model_server, folder / "inference.log"))  # both start at once
        wait_ready(f"{server}/readyz", serving, folder / "serve.log")
        wait_ready(f"{inference}/health", serving_model, folder / "inference.log")
        upstream = {"id": "policy", "url": f"{inference}/v1", "model": "tiny", "api_key_file": str(keys / "api.key")}
        httpx.post(f"{server}/api/upstreams", json=upstream, headers=admin, timeout=10).raise_for_status()
        auth = {"Authorization": f"Bearer {(keys / 'api.key').read_text().strip()}"}
        yield Services(server=server, inference=inference, admin=admin, inference_auth=auth)
