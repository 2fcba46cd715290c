"""`alight data export RUN`: the dashboard's trained run, exported through the CLI and read back without alight.

The store is a copy of the dashboard fixture's (a real tiny training run: merged two-call rows, an excluded
side-model call, a gate-flagged rollout, a rollout failed twice), served on loopback with one more rollout of
the run whose prompt carries a planted secret, captured through the real gateway.
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import make_url
from typer.testing import CliRunner

from alight.api_models import RolloutQuery
from alight.cli import app as cli
from alight.client import AlightClient
from alight.schemas import Mode, ModelCall, RewardCreate, Rollout, RolloutCreate, RolloutState, RunReport
from alight_server.app import create_app
from alight_server.config import ServerConfig
from alight_server.stacks.server_thread import ServerThread, free_port
from alight_server.store import Store, open_store
from alight_server.store.keys.upstream import SECRET_KEY_ENV
from alight_server.store.sql import SqlStore
from alight_server.trainer.step.filters import filter_for_training
from alight_server.trainer.step.samples import build_samples
from alight_server.trajectories.join import build_trajectory
from alight_server.ui.samples import sample_config
from tests.server.ui.conftest import ADMIN_KEY, Dashboard

READER = Path(__file__).parent / "export_reader.py"
SIDE = "side-haiku"  # the dashboard agent's side model, which the run's samples: settings exclude
# A GitHub personal access token's shape: detect-secrets knows it by its prefix.
SECRET = "ghp_" + "Zq7Xw3Lm9Rt2Yv8Kp4Nb6Hc1Jd5Fg0Sa3Ue7Wi"


@dataclass
class Served:
    url: str
    store: Store
    run_id: str
    secret_rollout: str
    gated_rollout: str


@pytest.fixture(scope="module")
def served(dashboard: Dashboard, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The dashboard's store copied (SQLite's backup API), served, plus a rollout of the run with a secret."""
    copy = tmp_path_factory.mktemp("export") / "alight.db"
    assert isinstance(dashboard.store, SqlStore)
    source = sqlite3.connect(str(make_url(dashboard.store.url).database))
    with sqlite3.connect(str(copy)) as target:
        source.backup(target)
    source.close()
    with pytest.MonkeyPatch.context() as env:  # the secret the run's data keys are wrapped under
        env.setenv(SECRET_KEY_ENV, dashboard.secret_key)
        store = open_store(f"sqlite:///{copy}")
        config = ServerConfig(admin_key=ADMIN_KEY, db_url=f"sqlite:///{copy}", port=free_port())
        app = create_app(config, store=store)
    rid = f"{dashboard.run_id}-s00001-t011-k00"
    with ServerThread(app, port=config.port) as url:
        with AlightClient(url, admin_key=ADMIN_KEY) as client:
            _secret_rollout(client, rid, f"{dashboard.run_id}-s00001-t011")
            # Another run whose id extends this one's: its rollouts share the prefix `<run id>-`.
            client.report_run(RunReport(id=f"{dashboard.run_id}-b"))
            client.create_rollouts([RolloutCreate(id=f"{dashboard.run_id}-b-s00000-t000-k00", task={"word": "x"})])
        yield Served(url, store, dashboard.run_id, rid, dashboard.gated_rollout)
    store.close()


def _secret_rollout(client: AlightClient, rid: str, group: str) -> None:
    """Through the gateway (the fake upstream the dashboard registered): a prompt holding SECRET, rewarded."""
    from openai import OpenAI

    for upstream in client.list_upstreams():  # the run's own inference server is gone with its run
        if upstream.id != "fake":
            client.remove_upstream(upstream.id)
    client.create_rollouts([RolloutCreate(id=rid, task={"word": "token", "note": SECRET}, group_id=group)])
    (start,) = client.claim_attempts(1, ids=[rid])
    agent = OpenAI(base_url=start.gateway_base_url, api_key=start.token, max_retries=0)
    agent.chat.completions.create(model="any", messages=[{"role": "user", "content": f"use {SECRET}"}], max_tokens=8)
    client.add_reward(rid, RewardCreate(value=1.0, attempt=start.attempt, final=True))
    client.request("POST", f"/api/rollouts/{rid}/attempts/{start.attempt}/finish", json={"status": "succeeded"})


def _export(served: Served, out: Path, *extra: str) -> Any:
    args = ["data", "export", served.run_id, "-o", str(out), "--server", served.url, "--admin-key", ADMIN_KEY]
    return CliRunner().invoke(cli, [*args, *extra])


def _read_without_alight(path: Path) -> dict[str, Any]:
    """The reader in a fresh interpreter: -I (no user site, no env) -S (no site-packages: alight cannot load)."""
    done = subprocess.run([sys.executable, "-I", "-S", str(READER), str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _builder_rows(served: Served) -> dict[tuple[str, int], dict[str, Any]]:
    """What the trainer's filter and sample builder make of the run's finished training rollouts, unpadded."""
    store, run = served.store, served.store.get_run(served.run_id)
    query = RolloutQuery(mode=Mode.TRAIN, id_prefix=f"{served.run_id}-", limit=1000)
    finished = [r for r in store.list_rollouts(query) if r.state in (RolloutState.SUCCEEDED, RolloutState.FAILED)]
    trajectories = [build_trajectory(store, r.id) for r in finished]
    config = sample_config(run.config)
    kept, _ = filter_for_training(trajectories, config)
    batch, _ = build_samples(kept, config)
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for r in range(batch.num_rows):
        rollout_id = batch.rollout_ids[int(batch.row_rollout[r])]
        n = int(batch.attention_mask[r].sum())
        index = sum(key[0] == rollout_id for key in rows)
        rows[(rollout_id, index)] = {
            "input_ids": batch.input_ids[r, :n].tolist(),
            "loss_mask": [int(m) for m in batch.loss_mask[r, :n].tolist()],
            "old_logprobs": batch.old_logprobs[r, :n].tolist(),
            "reward": float(batch.row_reward[r]),
            "group_id": batch.group_ids[int(batch.row_group[r])],
            "calls": len(batch.row_calls[r]),
        }
    return rows


@pytest.fixture(scope="module")
def exported_file(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("exported") / "run.jsonl.gz"  # gzip: the name ends in .gz
    result = _export(served, out)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def exported(exported_file: Path) -> dict[str, Any]:
    return _read_without_alight(exported_file)


def test_an_exported_run_read_without_alight_gives_the_sample_builders_rows(
    served: Served, exported: dict[str, Any]
) -> None:
    expected = _builder_rows(served)
    got = {
        (row["rollout_id"], row["index"]): {
            "input_ids": row["input_ids"],
            "loss_mask": row["loss_mask"],
            "old_logprobs": row["old_logprobs"],
            "reward": row["reward"],
            "group_id": row["group_id"],
            "calls": len(row["calls"]),
        }
        for row in exported["rows"]
    }
    assert got == expected
    # The run's own samples: settings hold: its agent's side-model call (exclude_models) is in no row.
    side = {
        (c.rollout_id, c.seq) for r in _run_rollouts(served) for c in _calls(served, r) if c.request["model"] == SIDE
    }
    assert side and not {(row["rollout_id"], seq) for row in exported["rows"] for seq in row["calls"]} & side
    assert (served.secret_rollout, 0) in got
    assert not any(rid == served.gated_rollout for rid, _ in got)  # the trainer's filter left it out


def _run_rollouts(served: Served) -> list[Rollout]:
    prefixed = served.store.list_rollouts(RolloutQuery(id_prefix=f"{served.run_id}-", limit=1000))
    return [r for r in prefixed if not r.id.startswith(f"{served.run_id}-b-")]  # not the other run's


def _calls(served: Served, rollout: Rollout) -> list[ModelCall]:
    return [tc.call for a in rollout.attempts for tc in build_trajectory(served.store, rollout.id, a.attempt).calls]


def test_each_generated_token_carries_the_policy_version_of_its_call(exported: dict[str, Any]) -> None:
    for row in exported["rows"]:
        for masked, version in zip(row["loss_mask"], row["policy_versions"], strict=True):
            assert (version >= 0) if masked else (version == -1), row["rollout_id"]


def test_the_export_holds_every_rollout_and_every_call_of_the_run(served: Served, exported: dict[str, Any]) -> None:
    rollouts = _run_rollouts(served)
    calls = sum(len(_calls(served, r)) for r in rollouts)
    assert set(exported["rollouts"]) == {r.id for r in rollouts}
    assert f"{served.run_id}-b-s00000-t000-k00" not in exported["rollouts"]  # another run's, under the same prefix
    assert exported["calls"] == calls
    header = exported["header"]
    assert (header["run_id"], header["redacted"], header["model"]) == (served.run_id, False, "tiny")
    planted = exported["rollouts"][served.secret_rollout]
    assert (planted["reward"], planted["rows"], planted["task"]["note"]) == (1.0, 1, SECRET)


def test_a_redacted_export_hides_a_planted_secret_and_drops_token_ids(
    served: Served, exported_file: Path, exported: dict[str, Any], tmp_path: Path
) -> None:
    redacted = tmp_path / "redacted.jsonl"
    result = _export(served, redacted, "--redacted")
    assert result.exit_code == 0, result.output
    assert SECRET in gzip.decompress(exported_file.read_bytes()).decode()  # it was there to hide
    assert SECRET not in redacted.read_text()
    read = _read_without_alight(redacted)
    assert read["header"]["redacted"] is True
    lines = [json.loads(line) for line in redacted.read_text().splitlines()[1:]]
    assert not any(key in line for line in lines for key in ("input_ids", "prompt_token_ids", "response_token_ids"))
    assert [row["loss_mask"] for row in read["rows"]] == [row["loss_mask"] for row in exported["rows"]]


def test_without_an_output_file_the_lines_go_to_standard_output(served: Served, exported: dict[str, Any]) -> None:
    args = ["data", "export", served.run_id, "--server", served.url, "--admin-key", ADMIN_KEY]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[0]["format"] == "alight-export"
    assert sum(line.get("kind") == "row" for line in lines) == len(exported["rows"])


def test_an_unknown_run_id_is_refused_by_name_and_writes_nothing(served: Served, tmp_path: Path) -> None:
    out = tmp_path / "none.jsonl.gz"
    args = ["data", "export", "no-such-run", "-o", str(out), "--server", served.url, "--admin-key", ADMIN_KEY]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1
    assert "no run with id 'no-such-run'" in result.output
    assert not out.exists() and not list(tmp_path.iterdir())


def test_a_redacted_export_applies_the_patterns_of_the_server_config(served: Served, tmp_path: Path) -> None:
    config = tmp_path / "server.yaml"
    config.write_text("redaction:\n  patterns:\n    - {name: fruit, regex: '\\bapple\\b'}\n")
    out = tmp_path / "redacted.jsonl"
    result = _export(served, out, "--redacted", "--config", str(config))
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "[REDACTED:fruit]" in text  # the run's tasks define apple, river and stone
    assert not re.search(r"\bapple\b", text)


def test_an_export_without_a_server_url_names_the_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ALIGHT_SERVER_URL", raising=False)
    result = CliRunner().invoke(cli, ["data", "export", "some-run", "-o", str(tmp_path / "run.jsonl")])
    assert result.exit_code == 2 and "--server" in result.output
    assert not list(tmp_path.iterdir())


def test_an_export_from_a_server_that_is_not_there_says_it_cannot_reach_it(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = CliRunner().invoke(cli, ["data", "export", "some-run", "-o", str(tmp_path / "run.jsonl"), "--server", url])
    assert result.exit_code == 1 and f"cannot reach {url}" in result.output
    assert not list(tmp_path.iterdir())
