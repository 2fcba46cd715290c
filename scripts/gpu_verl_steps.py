"""GPU check for the verl backend: two RL steps through verl (FSDP actor + vLLM replicas on Ray) behind the gateway.

Needs a CUDA machine with verl and vLLM installed (`pip install 'alight-server[verl]' vllm`); builds the
tiny model from its seed (no download). This script plays the agent (two chat calls per rollout through
the gateway, a reward, a finished attempt) so that only the verl side is under test. Asserts what the
embedded end-to-end test asserts:
1. the policy version advanced at the replicas: after step k they are registered at version k, and
   calls of step k are recorded with version k - 1;
2. the outputs changed: the same greedy (val) call answers with other logprobs after training;
3. the ids verl trained on are exactly the recorded ones (captured where they enter `update_actor`).
Exit 0 and a last line "verl check: OK" when all hold. `--expect-no-gpu` is the dry run for a CPU
machine: everything up to verl's own GPU check (config translation, Ray, verl's resource pool), which
must refuse with the backend's error; exit 0 when it does and Ray is stopped again.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from alight.client import AlightClient
from alight.schemas import AttemptFinish, Mode, RewardCreate, RolloutCreate
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.trainer.backends.verl.backend import VerlBackend
from alight_server.trainer.backends.verl.settings import VerlSettings
from alight_server.trainer.config.run import parse_config
from alight_server.trainer.run.weight_sync import WeightSync
from alight_server.trainer.step.samples import build_samples

ADMIN_KEY = "alk_gpu-verl-check"
GROUP, TASKS, MAX_TOKENS = 4, 2, 16


def agent(attempt: Any, client: AlightClient, turns: int = 2) -> None:
    """`turns` model calls around a 'tool result'; reward = share of the token budget the replies used."""
    headers = {"authorization": f"Bearer {attempt.token}"}
    messages = [{"role": "user", "content": f"Count to {attempt.rollout.task['n']}."}]
    used = 0
    for turn in range(turns):
        body = {"model": "policy", "messages": messages, "max_tokens": MAX_TOKENS}
        answer = httpx.post(f"{attempt.gateway_base_url}/chat/completions", headers=headers, json=body, timeout=300)
        answer.raise_for_status()
        reply = answer.json()["choices"][0]["message"]["content"] or ""
        used += len(reply)
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": f"tool: {turn}"}]
    reward = min(1.0, used / (8.0 * MAX_TOKENS))
    client.add_reward(attempt.rollout.id, RewardCreate(attempt=attempt.attempt, value=reward, final=True))
    client.finish_attempt(attempt.rollout.id, attempt.attempt, AttemptFinish(status="succeeded"))


def rollouts(client: AlightClient, step: int, mode: Mode, tasks: int, group: int) -> list[Any]:
    """`tasks` groups of `group` rollouts, claimed: this script is the controller and the agent."""
    created = client.create_rollouts(
        [
            RolloutCreate(id=f"s{step}-{mode.value}-{t}-{i}", task={"n": t + 3}, mode=mode, group_id=f"s{step}-{t}")
            for t in range(tasks)
            for i in range(group)
        ]
    )
    return client.claim_attempts(limit=len(created), ids=[r.id for r in created])


def probe(client: AlightClient, step: int) -> list[float]:
    """One greedy call (val mode: temperature 0) on the same prompt each time: the logprobs the gateway recorded."""
    [attempt] = rollouts(client, step, Mode.VAL, 1, 1)
    agent(attempt, client, turns=1)
    return client.trajectory(attempt.rollout.id).calls[0].call.response_logprobs or []


def trained_as_recorded(batch: Any, trained: list[tuple[int, ...]], calls: list[Any]) -> list[str]:
    """The rows verl's actor got are the sample rows, and every recorded call is the start of one of them."""
    rows = {tuple(batch.input_ids[r, : int(batch.attention_mask[r].sum())].tolist()) for r in range(batch.num_rows)}
    problems = [] if set(trained) == rows else ["the ids verl trained on differ from the sample rows"]
    for call in calls:
        ids = tuple(call.prompt_token_ids + call.response_token_ids)
        if not any(row[: len(ids)] == ids for row in rows):
            problems.append(f"call {call.id}: its recorded ids start no trained row")
    return problems


def dry_run(config: Any, settings: VerlSettings, client: AlightClient, server: ServerThread) -> int:
    """On a CPU machine: the backend must get as far as verl's GPU check, refuse there, and stop its Ray."""
    import ray  # pyright: ignore[reportMissingImports]  (verl brings Ray; its own venv, .venv-verl)

    try:
        VerlBackend(config, settings, client)
    except RuntimeError as exc:
        refused = "GPU(s)" in str(exc) and "Total available GPUs 0" in str(exc)
        print(f"verl refused as expected: {exc}" if refused else f"FAIL: another error: {exc!r}")
    else:
        refused = False
        print("FAIL: the backend started without a GPU")
    finally:
        client.close()
        server.stop()
    stopped = not ray.is_initialized()
    print("verl dry run: OK" if refused and stopped else f"verl dry run: FAILED (Ray stopped: {stopped})")
    return 0 if refused and stopped else 1


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--expect-no-gpu", action="store_true", help="a CPU machine: expect verl's GPU check")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="alight-verl-check-"))
    port = free_port()
    server_config = ServerConfig(port=port, db_url=f"sqlite:///{work / 'alight.db'}", admin_key=ADMIN_KEY)
    server = ServerThread(create_app(server_config), port=port)
    server.start()
    client = AlightClient(server.url, ADMIN_KEY, timeout=300)
    raw = {
        "model": args.model, "dataset": {"train": "unused.jsonl"}, "agent": {"entrypoint": "unused.py:main"},
        "group_size": GROUP, "tasks_per_step": TASKS, "output_dir": str(work / "run"),
        "optimizer": {"lr": 1e-4, "micro_batch_tokens": 4096},
    }  # fmt: skip
    config = parse_config(raw, work)
    settings = VerlSettings(
        n_gpus_per_node=args.gpus, gpu_memory_utilization=0.3, max_model_len=1024,
        overrides={"actor_rollout_ref.rollout.enforce_eager": True},  # no CUDA graph capture: a faster start
    )  # fmt: skip
    if args.expect_no_gpu:
        return dry_run(config, settings, client, server)
    backend = VerlBackend(config, settings, client)
    trained_rows: list[list[tuple[int, ...]]] = []  # per step
    update_actor = backend.workers.update_actor

    def capture(batch_td: Any) -> Any:  # the ids exactly as they enter verl's actor
        trained_rows.append([tuple(row.tolist()) for row in batch_td["input_ids"].unbind()])
        return update_actor(batch_td)

    backend.workers.update_actor = capture  # type: ignore[method-assign]
    failures: list[str] = []
    try:
        before = probe(client, 0)
        for step in (1, 2):
            attempts = rollouts(client, step, Mode.TRAIN, TASKS, GROUP)
            for attempt in attempts:
                agent(attempt, client)
            trajectories = [client.trajectory(a.rollout.id) for a in attempts]
            calls = [c.call for t in trajectories for c in t.calls]
            versions = {c.policy_version for c in calls}
            if versions != {step - 1}:
                failures.append(f"step {step}: calls recorded with versions {versions}, expected {{{step - 1}}}")
            batch, _ = build_samples(trajectories)
            metrics = backend.step(batch)
            version, paused_s = backend.push_weights(WeightSync(client), {"step": step})
            print(f"step {step}: {batch.num_rows} rows, loss {metrics.get('loss')}, version {version}, {paused_s:.1f}s")
            registered = {u.id: u.policy_version for u in client.list_upstreams()}
            if version != step or set(registered.values()) != {step}:
                failures.append(f"step {step}: version {version}, replicas registered at {registered}")
            failures += [f"step {step}: {p}" for p in trained_as_recorded(batch, trained_rows[-1], calls)]
        after = probe(client, 3)
        if not before or before == after:
            failures.append(f"the greedy probe's logprobs did not change after two steps: {before[:4]} {after[:4]}")
    finally:
        backend.close()
        client.close()
        server.stop()
    for failure in failures:
        print(f"FAIL: {failure}")
    print("verl check: OK" if not failures else f"verl check: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
