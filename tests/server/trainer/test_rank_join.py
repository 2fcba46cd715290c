"""A rank that dies before joining, or never connects, fails rank 0's join naming it, instead of hanging it.

Real ranks: `trainer.world_size` starts real `python -m alight_server.trainer.backends.follower` processes, and torchrun
real ones; a torchrun rank that never comes meets a real TCPStore hosted here as torchrun's agent hosts it.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from alight_server.stacks.server_thread import free_port
from alight_server.trainer.backends.distributed import join
from alight_server.trainer.backends.rendezvous import JoinError, host_store
from alight_server.trainer.config.run import TrainConfig

# A failing join must end long before this: a regression (rank 0 waiting inside torch) hangs here instead.
pytestmark = pytest.mark.timeout(300)
LONG_JOIN = {"join_timeout_s": 240}  # far beyond how long a rank takes to die: only noticing the death ends the join


# Each torchrun rank joins, the ranks gather their numbers, rank 0 closes the others.
TORCHRUN_RANK = """
import json, sys
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.backends.distributed import join
world = join(TrainConfig.model_validate(json.loads(open(sys.argv[1]).read())))
ranks = world.gather(world.rank)
if world.leader:
    print("gathered", ranks, flush=True)
else:
    assert world.receive()[0] == "close"
world.close()
"""


def _followers(parent: int) -> Iterator[tuple[int, int]]:
    """(pid, rank) of each follower process `parent` started and has not reaped yet."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
            environ = (stat.parent / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue  # gone meanwhile
        if ppid == parent and b"alight_server.trainer.backends.follower" in cmdline:
            rank = next(int(v.split(b"=", 1)[1]) for v in environ if v.startswith(b"RANK="))
            yield int(stat.parent.name), rank


def test_a_started_rank_that_refuses_its_config_fails_the_join_with_its_rank_exit_code_and_log(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    config = tiny_config(trainer={"world_size": 2, **LONG_JOIN})
    # model_copy does not validate: rank 0 holds a config that rank 1, validating its copy, refuses (as a
    # dumped config that does not load again did, before 778a66b).
    refused = config.async_rollout.model_copy(update={"enabled": True, "active_groups": config.tasks_per_step})
    config = config.model_copy(update={"async_rollout": refused})

    with pytest.raises(JoinError) as caught:
        join(config)

    message = str(caught.value)
    assert "training rank 1 exited with code 1" in message
    assert str(Path(config.output_dir) / "logs" / "rank-1.log") in message
    assert "must be greater than tasks_per_step" in message  # the rank's own reason, from the end of its log


def test_a_rank_killed_during_the_join_fails_it_naming_the_signal_and_stops_the_other_ranks(
    tiny_config: Callable[..., TrainConfig],
) -> None:
    config = tiny_config(trainer={"world_size": 3, **LONG_JOIN})
    killed: list[int] = []

    def kill_rank_1() -> None:  # as soon as it exists: it needs seconds to import torch before it can join
        deadline = time.monotonic() + 120
        while not killed and time.monotonic() < deadline:
            for pid, rank in _followers(os.getpid()):
                if rank == 1:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            time.sleep(0.02)

    killer = threading.Thread(target=kill_rank_1)
    killer.start()
    try:
        with pytest.raises(JoinError) as caught:
            join(config)
    finally:
        killer.join()

    assert killed, "rank 1 never started"
    assert "training rank 1 was killed by SIGKILL" in str(caught.value)
    assert list(_followers(os.getpid())) == []  # rank 2, still waiting for rank 0, was stopped and reaped


@pytest.mark.parametrize("host", ["torchrun's agent", "rank 0"])
def test_a_torchrun_rank_that_never_connects_fails_the_join_after_join_timeout_s(
    tiny_config: Callable[..., TrainConfig], monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    config = tiny_config(trainer={"join_timeout_s": 1})
    agent_store = None
    if host == "torchrun's agent":  # torchrun >= 2 hosts the store in its agent; every rank is a client
        agent_store, port = host_store(2, datetime.timedelta(seconds=30))
        monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    else:  # plain env:// (or an older launcher): rank 0 hosts the store and waits there for the others
        port = free_port()
        monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    for name, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MASTER_PORT", str(port))

    with pytest.raises(JoinError) as caught:
        join(config)

    message = str(caught.value)
    assert "within 1 s (trainer.join_timeout_s)" in message
    if agent_store is not None:  # rank 0 reads which ranks set their key in the launcher's store
        assert "training rank 1 of 2 did not connect" in message


def test_ranks_launched_by_torchrun_meet_in_its_store_and_join(
    tiny_config: Callable[..., TrainConfig], tmp_path: Path
) -> None:
    config = tiny_config(trainer={"join_timeout_s": 120})
    (tmp_path / "config.json").write_text(json.dumps(config.public_dump()))
    (tmp_path / "rank.py").write_text(TORCHRUN_RANK)
    env = {k: v for k, v in os.environ.items() if k not in {"RANK", "WORLD_SIZE", "MASTER_PORT"}}
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    done = subprocess.run(
        [*launch, str(tmp_path / "rank.py"), str(tmp_path / "config.json")],
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gathered [0, 1]" in done.stdout
