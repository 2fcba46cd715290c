"""Fine-tuning from imported traces, end to end on the tiny model, then RL from that checkpoint.

OpenTelemetry GenAI spans written by the OTel SDK (text only, current conventions, a reward event per trace)
are imported with the real `alight data import --format otel` into the run's store, rendered with the
policy's template; `alight train` with `algorithm.estimator: sft` and `traces.run` fine-tunes on the traces
scored 1 (`sft.min_reward`), and held-out traces imported under another name must become likelier. Then
`alight train --init-from` starts an RL run from that run's checkpoint.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner

from alight import semconv
from alight.api_models import RolloutQuery
from alight.cli import app as cli
from alight_server.inference.models import load_policy
from alight_server.stacks.opening import TrainingStacks
from alight_server.stacks.run_store import open_run_store
from alight_server.store import open_store
from alight_server.store.keys.kek import KekSource
from alight_server.trainer.backends.accumulation import token_logprobs
from alight_server.trainer.backends.embedded import EmbeddedBackend
from alight_server.trainer.config.run import parse_config
from alight_server.trainer.run.loop import TrainingRun
from alight_server.trainer.step.samples import SampleBatch, SampleConfig, build_samples
from alight_server.trajectories.join import build_trajectory
from alight_testing.tiny_run import tiny_run_config

pytestmark = pytest.mark.timeout(600)

AGENT = Path(__file__).parent / "agents" / "tool_agent.py"
GOOD = ["apple", "river", "stone", "plant", "green", "table", "light", "water"]
BAD = ["chair", "glass", "paper", "smile"]  # traces scored 0: sft.min_reward leaves them out
HELD_OUT = ["cloud", "forest", "bread", "music"]
# agents forked from one process that imported the agent once (controller/zygote.py), not an interpreter start and
# an import of httpx and the SDK per rollout: how an agent starts is not what these runs prove
PRELOAD = {"preload": True}


def write_otel(path: Path, words: list[str], reward: float) -> None:
    """One trace per word: a chat span (gen_ai.input/output.messages, text only) under a root with the reward."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("traces-test")
    for word in words:
        root = tracer.start_span("invoke_agent word-agent")
        reply = f"ANSWER: {word}" if reward else "no idea"
        attributes = {
            semconv.GEN_AI_OPERATION_NAME: semconv.OP_CHAT,
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": word}]}]),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": reply}]}]
            ),
        }
        tracer.start_span("chat policy", trace.set_span_in_context(root), attributes=attributes).end()
        root.add_event(semconv.EVENT_REWARD, {semconv.ATTR_REWARD_VALUE: reward, semconv.ATTR_REWARD_FINAL: True})
        root.end()
    path.write_bytes(encode_spans(exporter.get_finished_spans()).SerializeToString())


def alight(*argv: str, env: dict[str, str]) -> str:
    """The `alight` command run in this process, which has torch and transformers imported already: the same
    command, options and code as the installed one, without an interpreter start and those imports per command
    (what these commands prove is what they import and train, not how a process starts)."""
    sigterm = signal.getsignal(signal.SIGTERM)  # `alight train` makes SIGTERM a Ctrl-C for its own process
    try:
        result = CliRunner().invoke(cli, list(argv), env={"ALIGHT_SECRET_KEY": env["ALIGHT_SECRET_KEY"]})
    finally:
        signal.signal(signal.SIGTERM, sigterm)
    assert result.exit_code == 0, result.output
    return result.stdout


def held_out_batch(db: str, secret: str, tokenizer: Any) -> SampleBatch:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ALIGHT_SECRET_KEY", secret)
        store = open_store(db, KekSource.default())
        try:
            rollouts = store.list_rollouts(RolloutQuery(id_prefix="heldout-", limit=100))
            trajectories = [build_trajectory(store, r.id) for r in rollouts]
        finally:
            store.close()
    batch, report = build_samples(trajectories, SampleConfig(pad_token_id=int(tokenizer.pad_token_id or 0)))
    assert report.rows == len(HELD_OUT) and bool(batch.row_rendered.all()), report
    return batch


def mean_logprob(model: Any, batch: SampleBatch) -> float:
    with torch.no_grad():
        logp = token_logprobs(model, batch.input_ids, batch.attention_mask)  # (R, T)
    return float((logp * batch.loss_mask).sum() / batch.loss_mask.sum())


@dataclass
class SftRun:
    folder: Path
    run: TrainingRun
    result: Any
    batches: list[SampleBatch]
    env: dict[str, str]


@contextmanager
def recorded_batches() -> Iterator[tuple[pytest.MonkeyPatch, list[SampleBatch]]]:
    """Every batch the embedded backend steps on, while the block runs (its patch is open for more)."""
    batches: list[SampleBatch] = []
    original_step = EmbeddedBackend.step

    def recording_step(self: EmbeddedBackend, batch: SampleBatch) -> dict[str, float]:
        batches.append(batch)
        return original_step(self, batch)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(EmbeddedBackend, "step", recording_step)
        yield patch, batches


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SftRun]:
    folder = tmp_path_factory.mktemp("sft")
    env = {**os.environ, "ALIGHT_SECRET_KEY": "traces-test-secret"}  # the store's content key, for both sides
    run_dir = folder / "run"
    run_dir.mkdir()
    db = f"sqlite:///{run_dir / 'alight.db'}"
    write_otel(folder / "good.pb", GOOD, 1.0)
    write_otel(folder / "bad.pb", BAD, 0.0)
    write_otel(folder / "heldout.pb", HELD_OUT, 1.0)
    for name, files in (("traces", ["good.pb", "bad.pb"]), ("heldout", ["heldout.pb"])):
        paths = [str(folder / f) for f in files]
        alight("data", "import", *paths, "--format", "otel", "--name", name, "--model", "tiny", "--db", db, env=env)
    raw = tiny_run_config(
        folder, f"{AGENT}:main_http", [{"word": w} for w in GOOD],
        steps=4, optimizer={"lr": 3e-3}, dataset={"val_size": 0},
        algorithm={"estimator": "sft"}, sft={"min_reward": 1.0}, traces={"run": "traces", "per_step": 12},
    )  # fmt: skip
    (folder / "sft.yaml").write_text(yaml.safe_dump(raw))
    with recorded_batches() as (patch, batches):
        patch.setenv("ALIGHT_SECRET_KEY", env["ALIGHT_SECRET_KEY"])
        run = TrainingRun(parse_config(raw, folder), stacks=TrainingStacks(), show_progress=False)
        result = run.run()
    yield SftRun(folder, run, result, batches, env)


def test_sft_on_imported_traces_trains_the_good_ones_and_held_out_traces_become_likelier(sft_run: SftRun) -> None:
    batches, history = sft_run.batches, sft_run.result.history
    assert len(batches) == 4
    assert all(bool(b.row_rendered.all()) for b in batches)  # text-only traces: every row rendered
    trained = {b.rollout_ids[u] for b in batches for u in b.row_rollout.tolist()}
    assert len(trained) == len(GOOD) and all(r.startswith("traces-") for r in trained)  # the 0-scored left out
    steps = [h for h in history if "train/loss" in h]
    assert [h["sft/left_out"] > 0 for h in steps].count(True) >= 1
    assert steps[-1]["train/loss"] < 0.5 * steps[0]["train/loss"], [h["train/loss"] for h in steps]
    base, tokenizer = load_policy("tiny", device="cpu")
    db = f"sqlite:///{sft_run.folder / 'run' / 'alight.db'}"
    held_out = held_out_batch(db, sft_run.env["ALIGHT_SECRET_KEY"], tokenizer)
    before, after = mean_logprob(base, held_out), mean_logprob(sft_run.run.backend.model, held_out)  # type: ignore[attr-defined]
    print(f"held-out traces: mean logprob per reply token {before:.2f} -> {after:.2f}")
    assert after > before + 1.0, (before, after)  # words never trained on


def test_rl_continues_from_the_sft_checkpoint_with_init_from(sft_run: SftRun) -> None:
    folder = sft_run.folder
    raw = tiny_run_config(folder, f"{AGENT}:main_http", [{"word": w} for w in GOOD], steps=1, dataset={"val_size": 0},
                          controller=PRELOAD)  # fmt: skip
    raw["output_dir"] = str(folder / "rl")
    (folder / "rl.yaml").write_text(yaml.safe_dump(raw))
    alight("train", str(folder / "rl.yaml"), "--init-from", str(folder / "run"), "--quiet", env=sft_run.env)
    init = folder / "rl" / "init-policy"
    started, _ = load_policy(str(init), device="cpu")
    sft_model = sft_run.run.backend.model  # type: ignore[attr-defined]
    sft_weights = dict(sft_model.named_parameters())
    assert all(torch.equal(p, sft_weights[n].detach()) for n, p in started.named_parameters())  # the SFT policy
    assert json.loads((folder / "rl" / "summary.json").read_text())["steps"] == 1
    assert json.loads((folder / "rl" / "run.json").read_text())["config"]["model"] == str(init)


def test_rejection_sampling_fine_tuning_trains_only_the_rollouts_scored_at_least_min_reward(tmp_path: Path) -> None:
    """No traces: the step samples the policy, keeps the rollouts scored >= sft.min_reward, fine-tunes on them."""
    raw = tiny_run_config(
        tmp_path, f"{AGENT}:main_http", [{"word": w} for w in GOOD], steps=1, dataset={"val_size": 0},
        algorithm={"estimator": "sft"}, sft={"min_reward": 0.3}, controller=PRELOAD,
    )  # fmt: skip
    with recorded_batches() as (_, batches):
        result = TrainingRun(parse_config(raw, tmp_path), stacks=TrainingStacks(), show_progress=False).run()
    store = open_run_store(result.run_dir)
    try:
        sampled = [r for r in store.list_rollouts(RolloutQuery(limit=100)) if r.mode.value == "train"]
        rewards = {r.id: build_trajectory(store, r.id).final_reward for r in sampled}
    finally:
        store.close()
    good = {rid for rid, reward in rewards.items() if reward is not None and reward >= 0.3}
    trained = {b.rollout_ids[u] for b in batches for u in b.row_rollout.tolist()}
    assert len(rewards) == 4 and trained == good, (rewards, trained)
    step = next(h for h in result.history if "sft/kept" in h)
    assert (step["sft/kept"], step["sft/left_out"]) == (len(good), 4 - len(good))
