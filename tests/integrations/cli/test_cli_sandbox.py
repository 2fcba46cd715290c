"""The CLI harnesses' boundary, probed the way a policy would: one shell command through the CLI's own tool.

Per CLI (real Claude Code and Codex, `alight run`, the vLLM-shaped double scripted to call the shell tool
once with PROBE), the command tries what issue 29's table lists: a host environment secret, a write to
/tmp, the host's /etc/hostname and /root, a service on the host's loopback, the attempt token, and the
rollout API through the sandbox's own way out. Its output comes back to the policy as the tool result,
which the double logs: the assertions read what the policy would have seen.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from alight.client import AlightClient
from alight.schemas import Trajectory
from alight_sandbox.harness.sandbox import PLACEHOLDER_KEY, RELAY_PORT
from alight_server.stacks.one_rollout import embedded_server
from alight_server.stacks.server_thread import ServerThread
from alight_testing import FakeUpstreamState, create_fake_upstream

ROOT = Path(__file__).resolve().parents[3]
BIN = ROOT / ".tools" / "cli" / "node_modules" / ".bin"
ALIGHT = str(Path(sys.executable).parent / "alight")
INSTALL = "bash scripts/setup.sh --cli (installs the pinned CLIs into .tools/cli with npm)"
CANARY = f"host-secret-{uuid.uuid4().hex}"
BANNER = f"loopback-banner-{uuid.uuid4().hex}"
OUTSIDE = Path("/tmp") / f"alight-probe-{uuid.uuid4().hex}"  # the write outside the workspace

# Each section starts with a ==name== line, so a test reads only its own part of the tool's output.
PROBE = " ; ".join(
    [
        "echo ==env==",
        "env",
        "echo ==proc==",  # every process's environment, the sandbox's init (bwrap) included
        # (only the lines that matter: a CLI cuts a long tool output in the middle, which could hide a leak)
        "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>&1 | sort -u"
        " | grep -E '^(PATH|HOST_SECRET_CANARY|ALIGHT_[A-Z_]*|[A-Z_]*API_KEY)='",
        "echo ==hostname==",
        "cat /etc/hostname 2>&1",
        "echo ==root==",
        "ls -A /root 2>&1",
        "echo ==loopback==",
        "timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}; head -c 200 <&3' 2>&1",
        "echo ==abstract==",  # an abstract Unix socket on the host: no file to hide, only the network namespace
        'python3 -c \'import socket; s = socket.socket(socket.AF_UNIX); s.connect("\\0{abstract}"); '
        "print(s.recv(200))' 2>&1 | tail -1",
        "echo ==write==",
        f"echo written > {OUTSIDE} && echo wrote-inside",
        "echo ==rollout-api==",
        "timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/{relay}; "
        'printf "GET /api/rollouts HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n" >&3; head -c 300 <&3\' 2>&1',
        "echo",  # the refusal's body ends without a newline
        "echo ==end==",
    ]
)
CLIS = [
    pytest.param(("claude_code", "claude", "Bash", "command"), id="claude-code"),
    pytest.param(("codex", "codex", "exec_command", "cmd"), id="codex"),
]


@dataclass
class Probe:
    trajectory: Trajectory
    upstream: FakeUpstreamState
    output: str  # the tool result the policy got back

    def section(self, name: str) -> str:
        # Markers count only on lines of their own: the command's text (in a leaked task variable) has them too.
        match = re.search(rf"^=={name}==\n(.*?)\n?^==[a-z-]+==$", self.output, re.S | re.M)
        assert match, f"no =={name}== section in the tool output:\n{self.output[:3000]}"
        return match.group(1)


def _greet_every_connection(server: socket.socket) -> None:
    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(BANNER.encode() + b"\n")

    threading.Thread(target=serve, daemon=True).start()


@pytest.fixture(scope="module")
def loopback_service() -> Iterator[int]:
    """A service on the host's loopback that greets every connection with BANNER."""
    server = socket.create_server(("127.0.0.1", 0))
    _greet_every_connection(server)
    yield server.getsockname()[1]
    server.close()


@pytest.fixture(scope="module")
def abstract_service() -> Iterator[str]:
    """The same greeting on an abstract Unix socket of the host's (a name, no file)."""
    name = f"alight-probe-{uuid.uuid4().hex}"
    server = socket.socket(socket.AF_UNIX)
    server.bind("\0" + name)
    server.listen()
    _greet_every_connection(server)
    yield name
    server.close()


def installed(binary: str) -> Path:
    """The CLI's executable; the test skips, naming the install step, where it or bubblewrap is missing."""
    if not (BIN / binary).exists():
        pytest.skip(f"{binary} is not installed: {INSTALL}")
    if shutil.which("bwrap") is None:
        pytest.skip("the CLIs run in a bubblewrap sandbox: apt-get install -y bubblewrap")
    return BIN / binary


def _tool_results(request: dict) -> str:
    texts = []
    for message in request.get("messages") or []:
        if message.get("role") == "tool":
            content = message.get("content")
            texts.append(content if isinstance(content, str) else json.dumps(content))
    return "\n".join(texts)


@pytest.fixture(scope="module", params=CLIS)
def probe(request, loopback_service, abstract_service, tmp_path_factory) -> Iterator[Probe]:
    harness, binary, tool, argument = request.param
    exe = installed(binary)
    tmp = tmp_path_factory.mktemp(binary)
    command = PROBE.format(port=loopback_service, relay=RELAY_PORT, abstract=abstract_service)
    task = {
        "prompt": f"call {tool} {json.dumps({argument: command})}",
        "files": {"notes.txt": "hello\n"},
        "check": "test -f notes.txt && echo 0.75",
    }
    app = create_fake_upstream(model="policy")
    env = {**os.environ, "HOST_SECRET_CANARY": CANARY}  # where `alight run` was started: the policy must not see it
    settings = [f"--env=ALIGHT_{binary.upper()}_BIN={exe}", f"--env=ALIGHT_WORKSPACE_ROOT={tmp}"]
    with ServerThread(app) as url:
        done = subprocess.run(
            [ALIGHT, "run", f"alight_sandbox.harness.{harness}:episode", "--task", json.dumps(task), "--upstream",
             url + "/v1", "--model", "policy", "--json", "--reveal", "--timeout", "240", *settings],
            capture_output=True, text=True, env=env, timeout=300, cwd=tmp,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    fake: FakeUpstreamState = app.state.fake
    output = "\n".join(_tool_results(c.request) for c in fake.calls)
    yield Probe(Trajectory.model_validate_json(done.stdout), fake, output)
    OUTSIDE.unlink(missing_ok=True)


def test_the_probe_ran_in_the_cli_shell_and_its_output_reached_the_policy(probe):
    assert "==end==" in probe.output
    assert "PATH=" in probe.section("env") and "PATH=" in probe.section("proc")


def test_a_host_environment_secret_does_not_reach_the_cli_shell(probe):
    sections = probe.section("env") + probe.section("proc")  # both came back whole (a cut output fails here)
    assert "HOST_SECRET_CANARY" not in sections and CANARY not in probe.output


def test_the_attempt_token_does_not_reach_the_cli_shell(probe):
    env = probe.section("env")
    assert "alt1." not in probe.output  # every attempt token starts so (alight_server.http.auth.TOKEN_PREFIX)
    assert "ALIGHT_TOKEN=" not in env
    keys = re.findall(r"^(?:ANTHROPIC_API_KEY|OPENAI_API_KEY)=(.*)$", env, re.M)
    assert keys == [PLACEHOLDER_KEY]


def test_a_write_to_tmp_stays_in_the_sandbox(probe):
    assert "wrote-inside" in probe.section("write")  # the sandbox has a /tmp of its own
    assert not OUTSIDE.exists()


def test_the_hosts_etc_hostname_is_not_the_one_the_shell_reads(probe):
    assert probe.section("hostname").strip() == "sandbox"
    assert Path("/etc/hostname").read_text().strip() != "sandbox"


def test_the_hosts_root_folder_is_absent(probe):
    assert "No such file or directory" in probe.section("root")


def test_a_service_on_the_hosts_loopback_is_unreachable(probe):
    section = probe.section("loopback")
    assert BANNER not in section and "Connection refused" in section


def test_an_abstract_unix_socket_on_the_host_is_unreachable(probe):
    section = probe.section("abstract")
    assert BANNER not in section and "ConnectionRefusedError" in section


def test_the_rollout_api_is_refused_on_the_way_out(probe):
    assert probe.section("rollout-api").startswith("HTTP/1.1 403")


def test_the_sandboxed_episode_still_reaches_the_gateway_with_every_call_captured(probe):
    trajectory = probe.trajectory
    assert trajectory.state == "succeeded" and trajectory.final_reward == 0.75
    produced = [c.response for c in probe.upstream.calls if c.path.endswith("/chat/completions")]
    calls = [t.call for t in trajectory.calls]
    assert len(calls) == len(produced) >= 2
    for call, answer in zip(calls, produced, strict=True):
        assert call.status_code == 200 and call.prompt_token_ids == answer["prompt_token_ids"]
        assert call.response_token_ids == [t for c in answer["choices"] for t in c["token_ids"]]


def test_a_not_finite_check_score_is_refused_with_a_rollout_event(tmp_path):
    exe = installed("claude")
    task = {"prompt": "say hello", "check": "echo nan"}
    app = create_fake_upstream(model="policy")
    settings = [f"--env=ALIGHT_CLAUDE_BIN={exe}", f"--env=ALIGHT_WORKSPACE_ROOT={tmp_path}"]
    with ServerThread(app) as upstream, embedded_server(tmp_path) as (server, key):
        done = subprocess.run(
            [ALIGHT, "run", "alight_sandbox.harness.claude_code:episode", "--task", json.dumps(task), "--upstream",
             upstream + "/v1", "--model", "policy", "--json", "--timeout", "240", "--server", server,
             "--admin-key", key, *settings],
            capture_output=True, text=True, timeout=300, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-4000:]
        trajectory = Trajectory.model_validate_json(done.stdout)
        with AlightClient(server, key) as client:
            events = client.list_events(trajectory.rollout_id, kind="check_reward_refused")
    assert trajectory.final_reward is None
    assert [e.payload["line"] for e in events] == ["nan"]
