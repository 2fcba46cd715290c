"""Training through a real vLLM-CPU server: two steps, weights updated in place, token ids that are vLLM's own.

Needs the vLLM environment (minutes to build, so not in the default setup) and a few minutes to run:

    ALIGHT_VLLM=1 bash scripts/setup.sh
    .venv/bin/pytest -m vllm tests/server/trainer/test_train_vllm.py
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from alight.api_models import RolloutQuery
from alight.schemas import Mode
from alight_server.stacks.kinds import EmbeddedStack
from alight_server.stacks.opening import TrainingStacks
from alight_server.stacks.run_store import open_run_store
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.run.loop import TrainingRun
from alight_server.trainer.run.weight_sync import WeightSync
from alight_testing.tiny_model import build_tiny_vllm_model
from tests.server.vllm_env import needs_vllm

pytestmark = needs_vllm(__file__, timeout_s=1800)
PROBE = [1, 85, 91, 85, 86, 71, 79, 201]  # token ids of a short prompt: a fixed question to vLLM between steps


def greedy(url: str, key: str, model: str, prompt: list[int], max_tokens: int) -> tuple[list[int], list[float]]:
    """(token ids, their logprobs) vLLM generates for `prompt` at temperature 0, asked directly (with `key`)."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "logprobs": 0,
            "return_token_ids": True}  # fmt: skip
    choice = (
        httpx.post(f"{url}/v1/completions", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=120)
        .raise_for_status()
        .json()["choices"][0]
    )
    return choice["token_ids"], choice["logprobs"]["token_logprobs"]


def test_two_steps_through_vllm_update_its_weights_in_place_and_record_its_own_tokens(
    tiny_config: Callable[..., TrainConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = build_tiny_vllm_model(tmp_path / "tiny-vllm")
    config = tiny_config(
        model=str(model),
        optimizer={"lr": 1e-2},
        inference={"backend": "vllm", "dtype": "float32", "vllm": {"max_model_len": 2048}},
    )
    seen: dict[str, list[Any]] = {"versions": [], "probes": [], "direct": []}
    original_push, original_close = WeightSync.push, EmbeddedStack.close

    def recording_push(self: WeightSync, *args: Any, **kwargs: Any) -> tuple[int, float]:
        target: Any = self.target
        key = target.http.headers["authorization"].removeprefix("Bearer ")  # the weight updater's: opens every route
        seen["probes"].append(greedy(target.url, key, config.model, PROBE, 6))
        result = original_push(self, *args, **kwargs)
        seen["versions"].append((result[0], target.weight_version()))
        seen["probes"].append(greedy(target.url, key, config.model, PROBE, 6))
        return result

    def checking_close(self: EmbeddedStack) -> None:
        # Before vLLM goes: ask it directly for what the final validation's greedy calls recorded.
        try:
            if self.vllm is not None and self.vllm.server.process is not None:
                store = open_run_store(self.run_dir)
                for rollout in store.list_rollouts(RolloutQuery(limit=1000)):
                    for call in store.list_model_calls(rollout.id):
                        if rollout.mode == Mode.VAL and call.policy_version == 2:
                            direct = greedy(self.vllm.server.url, self.vllm.api_key, config.model,
                                            call.prompt_token_ids, len(call.response_token_ids))  # fmt: skip
                            seen["direct"].append((call.response_token_ids, call.response_logprobs, *direct))
                store.close()
        finally:
            original_close(self)  # a failed check must not leave vLLM running

    monkeypatch.setattr(WeightSync, "push", recording_push)
    monkeypatch.setattr(EmbeddedStack, "close", checking_close)
    result = TrainingRun(config, stacks=TrainingStacks(), show_progress=False).run()

    # vLLM's own weight version follows the gateway's policy version, one step at a time
    assert seen["versions"] == [(1, "1"), (2, "2")] and result.policy_version == 2
    # the running server's outputs changed with each update: new weights, no restart
    before, after = seen["probes"][0], seen["probes"][-1]
    assert before != after, "vLLM answers the probe exactly as before training"
    # every recorded greedy call of the final validation is what vLLM itself generates for that prompt
    assert seen["direct"], "no validation call was recorded at policy version 2"
    for recorded_ids, recorded_logprobs, direct_ids, direct_logprobs in seen["direct"]:
        assert recorded_ids == direct_ids
        assert recorded_logprobs == pytest.approx(direct_logprobs, abs=1e-3)
    # and the calls of step 2 were served by version 1
    store = open_run_store(result.run_dir)
    versions = {
        (r.metadata["step"], c.policy_version)
        for r in store.list_rollouts(RolloutQuery(limit=1000))
        if r.mode == Mode.TRAIN
        for c in store.list_model_calls(r.id)
    }
    store.close()
    assert versions == {(0, 0), (1, 1)}
    assert not _vllm_running(str(model))


def _vllm_running(model_dir: str) -> bool:
    """Whether a process serving `model_dir` still runs (the stack must have ended it)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if model_dir in cmdline.read_bytes().decode(errors="replace"):
                return True
        except OSError:
            continue
    return False
