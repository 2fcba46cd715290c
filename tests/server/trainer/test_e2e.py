"""End to end on the tiny model: server + controller + inference + trainer, a real agent subprocess, two steps."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

from alight.api_models import RolloutQuery
from alight.schemas import TERMINAL_STATES, Mode
from alight_server.inference.models import load_policy
from alight_server.stacks.opening import TrainingStacks
from alight_server.stacks.run_store import open_run_store
from alight_server.trainer.backends.embedded import EmbeddedBackend
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.run.loop import TrainingRun
from alight_server.trainer.step.samples import SampleBatch

pytestmark = pytest.mark.timeout(300)


def test_two_steps_train_the_served_policy_on_gateway_token_ids(
    tiny_config: Callable[..., TrainConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Local inference priced by the device-second and the sandbox by its seconds: each step's cost/ metrics.
    config = tiny_config(prices={"device_second": 0.5, "sandbox_second": 0.01})
    threads_outside = torch.get_num_threads()
    config.trainer.torch_threads = threads_outside + 1  # the update's own thread count
    batches: list[SampleBatch] = []
    threads_in_step: list[int] = []
    original_step = EmbeddedBackend.step

    def recording_step(self: EmbeddedBackend, batch: SampleBatch) -> dict[str, float]:
        batches.append(batch)
        threads_in_step.append(torch.get_num_threads())
        return original_step(self, batch)

    monkeypatch.setattr(EmbeddedBackend, "step", recording_step)
    run = TrainingRun(config, stacks=TrainingStacks(), show_progress=False)
    result = run.run()

    # the weights changed, and inference was told twice: two new policy versions
    base, _ = load_policy("tiny", device="cpu")
    assert isinstance(run.backend, EmbeddedBackend)
    trained = dict(run.backend.model.named_parameters())
    changed = [n for n, p in base.named_parameters() if not torch.equal(p, trained[n].detach())]
    assert changed, "no parameter changed after two training steps"
    assert result.policy_version == 2
    assert len(batches) == 2
    assert threads_in_step == [threads_outside + 1] * 2
    assert torch.get_num_threads() == threads_outside

    store = open_run_store(result.run_dir)
    rollouts = store.list_rollouts(RolloutQuery(limit=1000))
    train = [r for r in rollouts if r.mode == Mode.TRAIN]
    assert len(train) == 2 * 2 * 2  # steps x tasks x group
    assert {r.mode for r in rollouts} == {Mode.TRAIN, Mode.VAL}
    assert all(r.state in TERMINAL_STATES for r in rollouts)
    # the first step's rollouts (same weights) were created with the first validation, not after it ended
    first_val = [r for r in rollouts if r.mode == Mode.VAL and r.metadata["step"] == 0]
    assert max(r.created_at for r in train if r.metadata["step"] == 0) < max(r.updated_at for r in first_val)

    # step 2's calls were served by policy version 1, step 1's by version 0
    versions_by_step: dict[int, set[Any]] = {}
    for rollout in train:
        calls = store.list_model_calls(rollout.id)
        assert len(calls) == 2, f"the agent makes two model calls around its tool, got {len(calls)}"
        versions_by_step.setdefault(rollout.metadata["step"], set()).update(c.policy_version for c in calls)
    assert versions_by_step == {0: {0}, 1: {1}}

    # every generated token the trainer learned from is one the gateway recorded, logprob included
    for batch in batches:
        recorded = {
            (tuple(c.response_token_ids), tuple(round(x, 4) for x in c.response_logprobs))
            for rid in batch.rollout_ids
            for c in store.list_model_calls(rid)
        }
        for row in range(batch.num_rows):
            mask = batch.loss_mask[row].bool()
            ids = tuple(batch.input_ids[row][mask].tolist())
            assert ids, "a row without trained tokens"
            logprobs = tuple(round(x, 4) for x in batch.old_logprobs[row][mask].tolist())
            joined_ids = [i for call_ids, _ in recorded for i in call_ids]
            assert set(ids) <= set(joined_ids)
            assert any(ids[: len(c)] == c for c, _ in recorded if c)
            assert any(logprobs[: len(lp)] == lp for _, lp in recorded if lp)

    # each step's cost: the tokens and latencies the gateway recorded for its rollouts' trajectories (latest
    # attempts), the attempts' wall time, at the config's prices; per success over the rollouts with reward >= 1
    records = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    for line in (line for line in records if "train/reward_mean" in line):
        mine = [r for r in train if r.metadata["step"] == line["step"] - 1]
        calls = [c for r in mine for c in store.list_model_calls(r.id, r.attempts[-1].attempt)]
        assert line["cost/prompt_tokens"] == sum(len(c.prompt_token_ids) for c in calls)
        assert line["cost/completion_tokens"] == sum(len(c.response_token_ids) for c in calls)
        model_s = sum((c.latency_ms or 0.0) / 1000 for c in calls)
        sandbox_s = sum(
            (a.ended_at - a.started_at).total_seconds() for r in mine for a in r.attempts[-1:] if a.ended_at
        )
        assert math.isclose(line["cost/model_seconds"], model_s, rel_tol=1e-6) and model_s > 0
        assert math.isclose(line["cost/sandbox_seconds"], sandbox_s, rel_tol=1e-6) and sandbox_s > 0
        assert math.isclose(line["cost/usd"], model_s * 0.5 + sandbox_s * 0.01, rel_tol=1e-6)
        if line["cost/successes"]:
            assert math.isclose(line["cost/usd_per_success"], line["cost/usd"] / line["cost/successes"])
        else:
            assert "cost/usd_per_success" not in line  # no success: no finite cost per success
    store.close()

    # each step's integrity: violations and review flags among its rollouts, and how many wait for a person
    lines = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [line for line in lines if "train/reward_mean" in line]
    integrity = ("integrity/violation_share", "integrity/flag_share", "integrity/quarantined")
    assert len(steps) == 2 and all(line[key] == 0.0 for line in steps for key in integrity), steps
    assert result.plot_path is not None and result.plot_path.stat().st_size > 0
    assert result.val_before is not None and result.val_after is not None
