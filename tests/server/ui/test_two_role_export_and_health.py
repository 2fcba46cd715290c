"""A two-policy run's export and capture health build rows per policy, as its trainer does.

With `policies:` the gateway flags each call `policy:<name>` and the sample builder drops a flagged call, so
building from whole trajectories found no rows. One server on a SQLite store routes a real two-policy
training config's calls (planner, executor; the executor scored by the named reward `answer`) through the
real gateway to the fake upstream's two adapters: three finished rollouts of three calls (planner, executor,
planner), one without the executor's named reward, plus a call written into the store flagged with a
policy the run lacks (a forged row). A one-policy run's rollout is written into the same store.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from alight.cli import app as cli
from alight.schemas import AttemptFinish, RewardCreate, RolloutCreate, RunReport
from alight.semconv import HEADER_AGENT
from alight_server.app import create_app
from alight_server.config import GatewayConfig, ServerConfig
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.store import Store, open_store
from alight_server.trainer.config.policies import gateway_routing
from alight_server.trainer.config.run import TrainConfig, parse_config
from alight_server.trainer.step.filters import filter_for_training
from alight_server.trainer.step.policy_samples import split_by_policy
from alight_server.trainer.step.samples import SampleConfig, build_samples
from alight_server.trajectories.join import build_trajectory
from alight_testing import create_fake_upstream
from alight_testing.tiny_run import tiny_run_config
from tests.server.trainer.samples_fixtures import model_call

pytestmark = pytest.mark.timeout(300)

ADMIN_KEY = "alk_two-role-export"
READER = Path(__file__).parent / "export_reader.py"
RUN, ONE = "tworole", "onerole"
ROLLOUTS = [f"{RUN}-s00000-t00{k}-k00" for k in range(3)]
NO_ANSWER = ROLLOUTS[2]  # the executor's named reward is missing: only the planner trains on it
FORGED = f"{RUN}-s00000-t009-k00"  # one call, flagged with a policy the run does not have


@dataclass
class Seeded:
    url: str
    store: Store
    config: TrainConfig


def _config(folder: Path, **overrides: Any) -> TrainConfig:
    return parse_config(tiny_run_config(folder, "agent.py:main", [{"q": "x"}] * 4, **overrides), folder)


def _two_policies(folder: Path) -> TrainConfig:
    return _config(
        folder, lora={"enabled": True, "r": 2, "alpha": 4},
        policies={"planner": {}, "executor": {"reward": "answer"}},
        routing={"rules": [{"agent": "executor", "policy": "executor"}, {"agent": "planner", "policy": "planner"}]},
    )  # fmt: skip


def _rollout(admin: httpx.Client, rollout: str, agents: list[str], rewards: list[dict[str, Any]]) -> None:
    """One attempt whose calls go through the gateway as `agents`, each agent's call carrying on its conversation."""
    body = {"rollouts": [{"id": rollout, "task": {"q": rollout}, "group_id": rollout[:-4], "metadata": {"step": 0}}]}
    admin.post("/api/rollouts", json=body).raise_for_status()
    start = admin.post("/api/attempts/claim", json={"limit": 1, "ids": [rollout]}).json()["attempts"][0]
    said: dict[str, list[dict[str, str]]] = {}
    for agent in agents:
        messages = [*said.get(agent, []), {"role": "user", "content": f"{agent} {rollout} {len(said.get(agent, []))}"}]
        auth = {"authorization": f"Bearer {start['token']}", HEADER_AGENT: agent}
        request = {"model": "gpt-4o", "messages": messages, "max_tokens": 16}
        reply = httpx.post(f"{start['gateway_base_url']}/chat/completions", json=request, headers=auth, timeout=30)
        answer = reply.raise_for_status().json()["choices"][0]["message"]["content"]
        said[agent] = [*messages, {"role": "assistant", "content": answer}]
    for reward in rewards:
        admin.post(f"/api/rollouts/{rollout}/rewards", json={"attempt": 1, **reward}).raise_for_status()
    admin.post(f"/api/rollouts/{rollout}/attempts/1/finish", json={"status": "succeeded"}).raise_for_status()


def _forged(admin: httpx.Client, store: Store) -> None:
    """A copy of a recorded planner call in another rollout of the run, flagged `policy:intruder`."""
    _rollout(admin, FORGED, [], [{"value": 1.0, "final": True}])
    real = store.list_model_calls(ROLLOUTS[0])[0]
    flags = [f for f in real.flags if not f.startswith("policy:")] + ["policy:intruder"]
    store.add_model_call(real.model_copy(update={"id": "forged", "rollout_id": FORGED, "seq": 0, "flags": flags}))


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    folder = tmp_path_factory.mktemp("two-role")
    config = _two_policies(folder)
    db = f"sqlite:///{folder / 'alight.db'}"
    store = open_store(db)
    routing = gateway_routing(config.policies, config.routing)
    server = ServerConfig(admin_key=ADMIN_KEY, db_url=db, port=free_port(), gateway=GatewayConfig(routing=routing))
    fake = create_fake_upstream(model="base", adapters=("planner", "executor"))
    with ServerThread(fake) as fake_url, ServerThread(create_app(server, store=store), port=server.port) as url:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30) as admin:
            admin.post("/api/upstreams", json={"id": "u1", "url": f"{fake_url}/v1", "model": "base"}).raise_for_status()
            for run, dumped in (
                (RUN, config.public_dump()),
                (ONE, _config(tmp_path_factory.mktemp("one")).public_dump()),
            ):
                admin.post(
                    "/api/runs", json=RunReport(id=run, config=dumped).model_dump(mode="json")
                ).raise_for_status()
            for k, rollout in enumerate(ROLLOUTS):
                answer = [] if rollout == NO_ANSWER else [{"value": 0.25 * k, "name": "answer"}]
                _rollout(admin, rollout, ["planner", "executor", "planner"], [*answer, {"value": k, "final": True}])
            _forged(admin, store)
        yield Seeded(url, store, config)
    store.close()


def _trainer_rows(seeded: Seeded) -> dict[tuple[str, str, int], dict[str, Any]]:
    """(rollout, policy, n) -> the n-th row the trainer builds for that policy: its filter, split, builder."""
    store, config = seeded.store, seeded.config
    trajectories = [build_trajectory(store, rollout) for rollout in [*ROLLOUTS, FORGED]]
    samples = SampleConfig.from_section(config.samples)
    kept, _ = filter_for_training(trajectories, samples)
    split, _ = split_by_policy(kept, config.policies)
    rows: dict[tuple[str, str, int], dict[str, Any]] = {}
    for policy, copies in split.items():
        batch, _ = build_samples(copies, samples)
        for r in range(batch.num_rows):
            rollout, n = batch.rollout_ids[int(batch.row_rollout[r])], int(batch.attention_mask[r].sum())
            index = sum(key[:2] == (rollout, policy) for key in rows)
            rows[(rollout, policy, index)] = {
                "input_ids": batch.input_ids[r, :n].tolist(),
                "loss_mask": [int(m) for m in batch.loss_mask[r, :n].tolist()],
                "old_logprobs": batch.old_logprobs[r, :n].tolist(),
                "reward": float(batch.row_reward[r]),
                "group_id": batch.group_ids[int(batch.row_group[r])],
                "calls": list(batch.row_calls[r]),
            }
    return rows


def _export(seeded: Seeded, run: str, out: Path) -> dict[str, Any]:
    """`alight data export` through the CLI, read back by the standard-library reader (`python -I -S`)."""
    args = ["data", "export", run, "-o", str(out), "--server", seeded.url, "--admin-key", ADMIN_KEY]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    done = subprocess.run([sys.executable, "-I", "-S", str(READER), str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def exported(seeded: Seeded, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _export(seeded, RUN, tmp_path_factory.mktemp("exported") / "run.jsonl")


def test_each_policy_s_exported_rows_are_the_rows_its_trainer_builds(seeded: Seeded, exported: dict[str, Any]) -> None:
    expected = _trainer_rows(seeded)
    got: dict[tuple[str, str, int], dict[str, Any]] = {}
    for row in exported["rows"]:
        index = sum(key[:2] == (row["rollout_id"], row["policy"]) for key in got)
        got[(row["rollout_id"], row["policy"], index)] = {
            key: row[key] for key in ("input_ids", "loss_mask", "old_logprobs", "reward", "group_id", "calls")
        }
    assert got == expected
    trained = {(rollout, policy) for rollout, policy, _ in got}
    assert trained == {(r, "planner") for r in ROLLOUTS} | {(r, "executor") for r in ROLLOUTS if r != NO_ANSWER}


def test_an_exported_row_holds_only_its_own_policy_s_calls_scored_by_its_reward(exported: dict[str, Any]) -> None:
    calls: dict[tuple[str, str], list[int]] = {}
    rewards: dict[tuple[str, str], set[float]] = {}
    for row in exported["rows"]:
        calls.setdefault((row["rollout_id"], row["policy"]), []).extend(row["calls"])
        rewards.setdefault((row["rollout_id"], row["policy"]), set()).add(row["reward"])
    for k, rollout in enumerate(ROLLOUTS):
        assert (calls[(rollout, "planner")], rewards[(rollout, "planner")]) == ([0, 2], {k})  # the final reward
        if rollout != NO_ANSWER:  # its named reward `answer`
            assert (calls[(rollout, "executor")], rewards[(rollout, "executor")]) == ([1], {0.25 * k})
    for rollout in ROLLOUTS:  # one numbering per rollout, its rows counted on its line
        indexes = [row["index"] for row in exported["rows"] if row["rollout_id"] == rollout]
        assert indexes == list(range(exported["rollouts"][rollout]["rows"]))


def test_a_call_flagged_with_a_policy_the_run_lacks_is_exported_but_trains_nothing(exported: dict[str, Any]) -> None:
    assert exported["rollouts"][FORGED]["rows"] == 0
    assert not [row for row in exported["rows"] if row["rollout_id"] == FORGED]


def _one_policy_rollout(store: Store) -> str:
    """A finished rollout of the one-policy run: two calls, the second extending the first (no gateway: its
    routing is the two-policy run's)."""
    rollout = f"{ONE}-s00000-t000-k00"
    store.create_rollouts([RolloutCreate(id=rollout, task={"q": "x"}, group_id=rollout[:-4], metadata={"step": 0})])
    ((_, attempt),) = store.claim_attempts(1, ids=[rollout])
    store.add_model_calls([model_call(0, [1, 2], [10], rollout_id=rollout, attempt=attempt),
                           model_call(1, [1, 2, 10, 20], [11], rollout_id=rollout, attempt=attempt)])  # fmt: skip
    store.add_reward(rollout, RewardCreate(value=1.0, attempt=attempt, final=True))
    store.finish_attempt(rollout, attempt, AttemptFinish(status="succeeded"))
    return rollout


def test_a_one_policy_run_exports_the_builder_s_rows_with_no_policy_field(seeded: Seeded, tmp_path: Path) -> None:
    rollout = _one_policy_rollout(seeded.store)
    read = _export(seeded, ONE, tmp_path / "one.jsonl")
    batch, _ = build_samples([build_trajectory(seeded.store, rollout)], SampleConfig())
    assert [row["calls"] for row in read["rows"]] == [list(calls) for calls in batch.row_calls] == [[0, 1]]
    assert [row["input_ids"] for row in read["rows"]] == [batch.input_ids[0].tolist()]
    assert not any("policy" in row for row in read["rows"])


@pytest.fixture(scope="module")
def health(seeded: Seeded) -> dict[str, Any]:
    with httpx.Client(base_url=seeded.url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30) as admin:
        (step,) = admin.get(f"/api/ui/runs/{RUN}/health").raise_for_status().json()["steps"]
    return step


def test_capture_health_counts_the_rows_each_policy_trains_on_and_no_false_drops(health: dict[str, Any]) -> None:
    # 3 rollouts x 3 calls + the forged call; the executor's call of NO_ANSWER goes with its missing reward
    assert (health["calls"], health["calls_used"], health["rows"]) == (10, 8, 8)
    assert not any(reason.startswith("flagged") for reason in health["dropped_calls"])  # policy flags drop nothing
    assert health["dropped_calls"] == {"unknown_policy": 1, "rollout_no_named_reward": 1}
    assert health["calls"] == health["calls_used"] + sum(health["dropped_calls"].values())
    assert health["dropped_rollouts"] == {"no_named_reward": 2}  # NO_ANSWER and FORGED lack `answer`
    assert health["flagged_calls"] == {}  # a call's policy:<name> flag is its routing, not a capture problem


def test_capture_health_gives_each_policy_its_own_counts(health: dict[str, Any]) -> None:
    own = {name: {k: counts[k] for k in ("calls", "calls_used", "rows", "no_named_reward")}
           for name, counts in health["policies"].items()}  # fmt: skip
    assert own == {
        "planner": {"calls": 6, "calls_used": 6, "rows": 6, "no_named_reward": 0},
        "executor": {"calls": 2, "calls_used": 2, "rows": 2, "no_named_reward": 2},
    }


def test_the_token_view_counts_the_calls_left_out_with_a_missing_named_reward(seeded: Seeded) -> None:
    with httpx.Client(base_url=seeded.url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30) as admin:
        view = admin.get(f"/api/ui/rollouts/{NO_ANSWER}/tokens").raise_for_status().json()
    assert {row["policy"] for row in view["rows"]} == {"planner"}
    assert view["dropped_calls"] == {"rollout_no_named_reward": 1}  # the executor's call, with its reward missing
