"""An agent killed while its model call is in flight: the call is recorded as client_gone, the upstream stops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from alight.schemas import ModelCall, RolloutCreate, UpstreamCreate
from alight_server.http.auth import issue_attempt_token
from alight_server.inference.engine import InferenceEngine
from alight_server.inference.server import create_inference_app
from alight_server.stacks.kinds import KEY_DIR
from alight_server.stacks.server_thread import ServerThread

pytestmark = pytest.mark.timeout(120)

AGENT = """
import sys
from openai import OpenAI

stream = sys.argv[1] == "stream"
reply = OpenAI(max_retries=0).chat.completions.create(
    model="m", messages=[{"role": "user", "content": "tell me everything"}], max_tokens=2000,
    stream=stream, extra_body={"ignore_eos": True},
)
told = False
for chunk in (reply if stream else []):
    if not told and chunk.choices and chunk.choices[0].delta.content:
        print("a token arrived", flush=True)  # the test kills this agent once it has one
        told = True
"""


@pytest.fixture(scope="module")
def engine() -> Iterator[InferenceEngine]:
    with InferenceEngine.from_model_name("tiny", device="cpu", max_batch_size=4) as eng:
        yield eng


@pytest.fixture
def gateway_url(live_server: Any, engine: InferenceEngine, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """(the attempt's OPENAI_BASE_URL, its token, its rollout id) with the tiny engine as the upstream."""
    key_file = tmp_path / KEY_DIR / "u1.key"  # where conftest.py's server reads upstream keys from
    key_file.parent.mkdir()
    key_file.write_text("client-gone-key")
    with ServerThread(create_inference_app(engine, api_key="client-gone-key")) as url:
        upstream = UpstreamCreate(id="u1", url=f"{url}/v1", model=engine.model_name, api_key_file=str(key_file))
        live_server.store.add_upstream(upstream)
        [rollout] = live_server.store.create_rollouts([RolloutCreate(task={})])
        [(_, n)] = live_server.store.claim_attempts(1, ids=[rollout.id])
        token = issue_attempt_token(live_server.app.state.token_secret, rollout.id, n, ttl_s=600)
        yield f"{live_server.url}/gw/{rollout.id}/{n}/v1", token, rollout.id


def kill_mid_call(tmp_path: Any, engine: InferenceEngine, base_url: str, token: str, mode: str) -> None:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    env = {**os.environ, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": token}
    agent = subprocess.Popen(
        [sys.executable, str(script), mode], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while engine.running_choices == 0:  # the call reached the upstream and is generating
            assert agent.poll() is None and time.monotonic() < deadline, "the call never reached the upstream"
            time.sleep(0.02)
        if mode == "stream":  # killed once a token reached it: the call has something received to record
            assert agent.stdout is not None and agent.stdout.readline() == "a token arrived\n"
    finally:
        agent.send_signal(signal.SIGKILL)
        agent.communicate()  # reaps it and closes its stdout


def recorded_calls(live_server: Any, rollout_id: str, timeout_s: float = 5.0) -> list[ModelCall]:
    deadline = time.monotonic() + timeout_s
    while not (calls := live_server.store.list_model_calls(rollout_id)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return calls


def wait_idle(engine: InferenceEngine, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while engine.running_choices and time.monotonic() < deadline:
        time.sleep(0.02)
    return engine.running_choices == 0


def test_a_killed_agents_non_streamed_call_is_recorded_as_client_gone_and_its_generation_stops(
    tmp_path: Any, live_server: Any, engine: InferenceEngine, gateway_url: tuple[str, str, str]
) -> None:
    base_url, token, rollout_id = gateway_url
    kill_mid_call(tmp_path, engine, base_url, token, "plain")
    assert wait_idle(engine, 2.0), "the gateway kept the upstream generating for an agent that is gone"
    [call] = recorded_calls(live_server, rollout_id)
    assert (call.status_code, call.flags) == (499, ["client_gone"])
    assert call.error is not None and call.error.startswith("client_gone")
    assert call.request["messages"] == [{"role": "user", "content": "tell me everything"}]
    assert call.response is None and call.response_token_ids == []


def test_a_killed_agents_stream_is_recorded_as_client_gone_with_what_it_received(
    tmp_path: Any, live_server: Any, engine: InferenceEngine, gateway_url: tuple[str, str, str]
) -> None:
    base_url, token, rollout_id = gateway_url
    kill_mid_call(tmp_path, engine, base_url, token, "stream")
    assert wait_idle(engine, 2.0)
    [call] = recorded_calls(live_server, rollout_id)
    assert (call.status_code, call.flags, call.streamed) == (499, ["client_gone"], True)
    assert call.response_token_ids, "the tokens streamed before the agent died are kept"
    assert len(call.response_logprobs) == len(call.response_token_ids)
