"""Where the ranks meet: the TCPStore, the ranks rank 0 starts itself, and rank 0's bounded wait for the others.

Rank 0 must not enter `init_process_group` before every rank is connected: torch then waits in C++ for its whole
timeout (no signal interrupts it), so a dead rank would hang the run. Each other rank sets its `ready_key` in the
store first; rank 0 polls those keys and the ranks it started (`await_ranks`).
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch.distributed as dist
from torch.distributed.distributed_c10d import Store
from torch.distributed.rendezvous import rendezvous

if TYPE_CHECKING:
    from alight_server.trainer.config.run import TrainConfig

CONFIG_ENV = "ALIGHT_RANK_CONFIG"  # the run's config (JSON) for ranks rank 0 started
POLL_S = 0.1
LOG_TAIL_LINES = 20


class JoinError(RuntimeError):
    """A rank died or never connected before the process group formed; the message says which and why."""


def ready_key(rank: int) -> str:
    # torchrun's store outlives a restart of its workers: a key from an earlier attempt must not count.
    return f"alight/join/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/rank-{rank}"


def host_store(size: int, timeout: datetime.timedelta) -> tuple[Store, int]:
    """Rank 0's own store for the ranks it starts, on a free loopback port, and that port; it waits for nobody."""
    # torch documents dist.TCPStore; its stubs re-export it without marking it public.
    tcp_store = dist.TCPStore  # pyright: ignore[reportPrivateImportUsage]
    store = tcp_store("127.0.0.1", 0, size, is_master=True, timeout=timeout, wait_for_workers=False)
    return store, store.port


def launcher_store(rank: int, size: int, timeout: datetime.timedelta) -> Store:
    """The store of a launch by torchrun (MASTER_ADDR/MASTER_PORT): the launcher's, or rank 0's under plain env://."""
    try:
        store, _, _ = next(rendezvous("env://", rank=rank, world_size=size, timeout=timeout))
    except dist.DistStoreError as exc:  # rank 0 hosting the store waits there for every rank to connect
        if rank != 0:
            raise
        raise JoinError(
            f"not every one of the {size} training ranks connected to rank 0's store within "
            f"{timeout.total_seconds():g} s (trainer.join_timeout_s); see the launcher's output ({exc})"
        ) from exc
    return store


def start_ranks(config: TrainConfig, size: int, port: int) -> tuple[list[subprocess.Popen[bytes]], list[Path]]:
    """Rank 0 without a launcher: ranks 1..size-1 as subprocesses that meet at 127.0.0.1:`port`."""
    folder = Path(config.output_dir) / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    workers: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []
    for rank in range(1, size):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(size),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            CONFIG_ENV: json.dumps(config.public_dump()),  # keys hidden: followers never talk to servers
        }
        log = folder / f"rank-{rank}.log"
        with log.open("ab") as out:
            command = [sys.executable, "-m", "alight_server.trainer.backends.follower"]
            workers.append(subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT))
        logs.append(log)
    return workers, logs


def exited_rank(workers: list[subprocess.Popen[bytes]], logs: list[Path]) -> str | None:
    """Why the first started rank that has exited is gone (rank, exit code, its log's end); None while all run."""
    for rank, (worker, log) in enumerate(zip(workers, logs, strict=True), start=1):
        code = worker.poll()
        if code is not None:
            how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
            return f"training rank {rank} {how}; the end of {log}:\n{log_tail(log)}"
    return None


def log_tail(log: Path) -> str:
    try:
        with log.open("rb") as file:
            file.seek(max(0, log.stat().st_size - 8192))
            text = file.read().decode(errors="replace")
    except OSError as exc:
        return f"(unreadable: {exc})"
    return "\n".join(text.rstrip().splitlines()[-LOG_TAIL_LINES:]) or "(empty)"


def await_ranks(
    store: Store,
    size: int,
    timeout: datetime.timedelta,
    workers: list[subprocess.Popen[bytes]],
    logs: list[Path],
) -> None:
    """On rank 0: return once ranks 1..size-1 have all set their `ready_key`; raise JoinError when one cannot."""
    deadline = time.monotonic() + timeout.total_seconds()
    waiting = list(range(1, size))
    while True:
        waiting = [rank for rank in waiting if not store.check([ready_key(rank)])]
        if not waiting:
            return
        if (gone := exited_rank(workers, logs)) is not None:
            raise JoinError(f"before joining, {gone}")
        if time.monotonic() > deadline:
            missing = f"rank {waiting[0]}" if len(waiting) == 1 else f"ranks {', '.join(map(str, waiting))}"
            where = ", ".join(map(str, logs)) if workers else "the launcher's (torchrun's) output"
            raise JoinError(
                f"training {missing} of {size} did not connect within {timeout.total_seconds():g} s "
                f"(trainer.join_timeout_s); see {where}, or raise trainer.join_timeout_s if a rank needs longer"
            )
        time.sleep(POLL_S)
