"""The embedded stack's identity in the run folder: its ports and admin key, kept across `--resume`.

A trainer killed mid-step leaves attempts the server still calls running. The resumed stack serves at the same
address with the same admin key (so the same token secret): what the store and the run folder say about those
attempts stays true, and the controller can settle them. The file holds a secret, so it is written 0600 and
re-tightened when found looser.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import stat
from dataclasses import asdict, dataclass
from pathlib import Path

from alight_server.stacks.server_thread import free_port

log = logging.getLogger("alight.trainer")

STATE_FILE = "stack.json"


@dataclass(frozen=True)
class StackState:
    server_port: int
    inference_port: int
    admin_key: str


def _port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no obstacle
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def write_private(path: Path, text: str) -> None:
    """`text` in a file only its owner reads (0600), replaced whole: a reader never sees half of it."""
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def load_or_create(run_dir: Path) -> StackState:
    """The run's stack state: the stored one (ports re-picked only when taken), else a fresh one, stored."""
    path = run_dir / STATE_FILE
    stored: StackState | None = None
    try:
        stored = StackState(**json.loads(path.read_text()))
    except FileNotFoundError:
        pass
    except (OSError, ValueError, TypeError) as exc:
        log.warning("ignoring unreadable %s (%s); the stack starts with a new address and key", path, exc)
    if stored is None:
        state = StackState(free_port(), free_port(), secrets.token_urlsafe(24))
    else:
        state = StackState(
            server_port=stored.server_port if _port_free(stored.server_port) else free_port(),
            inference_port=stored.inference_port if _port_free(stored.inference_port) else free_port(),
            admin_key=stored.admin_key,
        )
        if state.server_port != stored.server_port:
            log.warning("port %d of the earlier run is taken; the server moves to %d", stored.server_port,
                        state.server_port)  # fmt: skip
    if state != stored or stat.S_IMODE(path.stat().st_mode) != 0o600:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_private(path, json.dumps(asdict(state)))
    return state
