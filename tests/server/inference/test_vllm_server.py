"""Starting vLLM as a subprocess: its command line, and bad starts ending in one sentence with no process left.

The bad starts run a fake interpreter (fake_vllm.py) that prints what vLLM 0.32 printed in each case here.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from alight_server.inference.vllm_server import VllmLaunch, VllmServer, VllmStartError
from alight_server.stacks.server_thread import free_port

FAKE = Path(__file__).with_name("fake_vllm.py")


def launch(python: str = sys.executable, **overrides: object) -> VllmLaunch:
    settings: dict[str, object] = {"model_dir": Path("/models/tiny"), "served_name": "tiny", "port": free_port()}
    return VllmLaunch(python=python, **{**settings, **overrides})  # type: ignore[arg-type]


@pytest.fixture
def fake_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    script = tmp_path / "python"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("FAKE_VLLM_CHILD_PID_FILE", str(tmp_path / "child.pid"))
    yield str(script)
    pid = int((tmp_path / "child.pid").read_text()) if (tmp_path / "child.pid").exists() else None
    assert pid is None or not alive(pid), f"the fake's child {pid} outlived the server"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone in all but name: it runs nothing and holds no port.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(")")[-1].split()[0] != "Z"


def start(python: str, tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch, timeout_s: float = 60) -> str:
    monkeypatch.setenv("FAKE_VLLM_MODE", mode)
    server = VllmServer(launch(python), tmp_path / "vllm.log", startup_timeout_s=timeout_s)
    try:
        server.start()
    except VllmStartError as exc:
        return str(exc)
    finally:
        server.stop()
    raise AssertionError("the start did not fail")


def test_the_command_serves_the_model_under_its_name_eagerly_on_loopback() -> None:
    cmd = launch(python="/v/bin/python", port=8123, dtype="bfloat16").command()
    assert cmd[:3] == ["/v/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    pairs = dict(zip(cmd[3::2], cmd[4::2], strict=False))
    assert pairs["--model"] == "/models/tiny"
    assert pairs["--served-model-name"] == "tiny" and pairs["--host"] == "127.0.0.1" and pairs["--port"] == "8123"
    assert pairs["--dtype"] == "bfloat16" and "--enforce-eager" in cmd and "--enable-lora" not in cmd


def test_lora_asks_for_one_adapter_of_the_smallest_rank_vllm_accepts_that_holds_it() -> None:
    cmd = launch(lora_rank=12).command()
    assert cmd[cmd.index("--enable-lora") :][:5] == ["--enable-lora", "--max-loras", "1", "--max-lora-rank", "16"]
    assert launch(lora_rank=12).env({})["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"


def test_the_environment_turns_on_the_weight_update_routes_and_sizes_the_kv_cache() -> None:
    env = launch(kv_cache_gb=3).env({"PATH": "/bin"})
    assert env["VLLM_SERVER_DEV_MODE"] == "1" and env["VLLM_CPU_KVCACHE_SPACE"] == "3" and env["PATH"] == "/bin"
    assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING" not in env


def test_extra_args_come_last_so_they_override() -> None:
    assert launch(extra_args=["--max-num-seqs", "8"]).command()[-2:] == ["--max-num-seqs", "8"]


def test_a_missing_interpreter_names_the_setup_command(tmp_path: Path) -> None:
    with pytest.raises(
        VllmStartError, match=r"^no vLLM interpreter at .*/nope: build it with `ALIGHT_VLLM=1 bash scripts/setup.sh`$"
    ):
        VllmServer(launch(str(tmp_path / "nope")), tmp_path / "vllm.log").start()


def test_a_taken_port_is_named_before_anything_starts(tmp_path: Path, fake_python: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = VllmServer(launch(fake_python, port=port), tmp_path / "vllm.log")
        with pytest.raises(
            VllmStartError, match=rf"^port {port} is already in use: free it or set inference.vllm.port"
        ):
            server.start()
    assert server.process is None and not (tmp_path / "vllm.log").exists()


def test_an_interpreter_without_vllm_names_the_setup_command(
    tmp_path: Path, fake_python: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = start(fake_python, tmp_path, "no-vllm", monkeypatch)
    assert message.startswith(f"the interpreter {fake_python} has no vLLM installed: run `ALIGHT_VLLM=1 bash")


def test_running_out_of_memory_says_which_settings_to_lower(
    tmp_path: Path, fake_python: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = start(fake_python, tmp_path, "oom", monkeypatch)
    assert message.startswith("vLLM ran out of memory (ValueError: Available memory on node 0 (12.86/16.96 GiB) on kv ")
    assert "): lower inference.vllm.kv_cache_gb or inference.vllm.max_model_len" in message
    assert message.endswith(f"its log: {tmp_path / 'vllm.log'}")


def test_a_model_that_does_not_load_is_named(tmp_path: Path, fake_python: str, monkeypatch: pytest.MonkeyPatch) -> None:
    message = start(fake_python, tmp_path, "bad-model", monkeypatch)
    assert message.startswith("vLLM could not load the model /models/tiny (Value error, Invalid repository ID or local")


def test_a_server_killed_by_the_kernel_is_said_to_be_out_of_memory(
    tmp_path: Path, fake_python: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = start(fake_python, tmp_path, "sigkill", monkeypatch)
    assert message.startswith("vLLM was killed (signal 9), most likely by the kernel for lack of memory")


def test_a_server_that_never_answers_is_stopped_at_the_timeout(
    tmp_path: Path, fake_python: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = start(fake_python, tmp_path, "hang", monkeypatch, timeout_s=3)
    assert message.startswith("vLLM did not answer http://127.0.0.1:") and "within 3s" in message


def test_a_healthy_server_is_up_and_stop_ends_its_children(
    tmp_path: Path, fake_python: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_VLLM_MODE", "serve")
    server = VllmServer(launch(fake_python), tmp_path / "vllm.log", startup_timeout_s=60)
    assert server.start() == server.url and server.startup_s is not None
    child = int((tmp_path / "child.pid").read_text())
    assert alive(child)
    server.stop()
    assert not alive(child)
    server.stop()  # twice is harmless


def test_a_server_spawned_early_is_the_one_start_waits_for(
    tmp_path: Path, fake_python: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_VLLM_MODE", "serve")
    server = VllmServer(launch(fake_python), tmp_path / "vllm.log", startup_timeout_s=60)
    server.spawn()
    spawned = server.process
    try:
        server.spawn()  # a second spawn launches nothing
        assert server.process is spawned
        assert server.start() == server.url and server.process is spawned
    finally:
        server.stop()


def test_a_run_whose_trainer_fails_after_vllm_was_spawned_leaves_no_vllm_behind(
    tmp_path: Path, fake_python: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from alight_server.stacks.opening import TrainingStacks
    from alight_server.trainer.config.run import parse_config
    from alight_server.trainer.run.loop import TrainingRun

    monkeypatch.setenv("FAKE_VLLM_MODE", "hang")  # still starting when the trainer fails
    port = free_port()
    broken = tmp_path / "broken-model"  # a model folder vLLM is handed but the trainer cannot load
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "no-such-architecture"}')
    raw = {"model": str(broken), "dataset": {"train": "t.jsonl"},
           "agent": {"entrypoint": "a.py:main"},
           "inference": {"backend": "vllm", "vllm": {"python": fake_python, "port": port}},
           "output_dir": str(tmp_path / "run")}  # fmt: skip
    (tmp_path / "t.jsonl").write_text('{"prompt": "1 + 1"}\n')
    # The trainer fails to load that folder after the spawn.
    with pytest.raises(Exception, match=r"tokenizer|no-such-architecture"):
        TrainingRun(parse_config(raw, tmp_path), stacks=TrainingStacks(), show_progress=False).run()
    assert (tmp_path / "run" / "logs" / "vllm.log").is_file()  # vLLM had been spawned
    assert not _serving_on(port)  # (and the fake_python fixture checks that its child is gone)


def _serving_on(port: int) -> list[int]:
    """Live processes started with `--port <port>` (the fake vLLM's command line)."""
    needle = f"\0--port\0{port}\0".encode()
    return [
        int(p.parent.name)
        for p in Path("/proc").glob("[0-9]*/cmdline")
        if needle in _read(p) and alive(int(p.parent.name))
    ]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""  # exited while we looked
