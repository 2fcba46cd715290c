"""alight's own export imported back (`alight data import --format alight`): ids, logprobs, masks and rewards exact.

The export is the dashboard fixture's real tiny training run, written by `alight data export` through its server;
it is imported into a fresh store and every call, reward and training row is compared with the file.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from alight.cli import app as cli
from alight_server.store import Store, open_store
from alight_server.traces.formats import alight_export
from alight_server.traces.importer import import_traces
from alight_server.trainer.step.samples import build_samples
from alight_server.trajectories.join import build_trajectory
from alight_server.ui.samples import sample_config
from tests.server.ui.conftest import ADMIN_KEY, Dashboard


@pytest.fixture(scope="module")
def exported(dashboard: Dashboard, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("roundtrip") / "run.jsonl.gz"
    args = ["data", "export", dashboard.run_id, "-o", str(out), "--server", dashboard.url, "--admin-key", ADMIN_KEY]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def imported(exported: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    store = open_store(f"sqlite:///{tmp_path_factory.mktemp('imported') / 'alight.db'}")
    report = import_traces(store, "rt", "alight", alight_export.read([exported]), renderer=None)
    assert report.errors == [] and report.calls["rendered"] == 0
    yield store
    store.close()


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines()]


def _by_source(store: Store) -> dict[str, str]:
    """The exported rollout id each imported rollout came from -> the imported id."""
    return {r.metadata["offline"]["source"]: r.id for r in store.list_rollouts()}


def test_every_exported_call_imports_with_its_recorded_ids_and_logprobs(exported, imported):
    lines = _lines(exported)
    ids = _by_source(imported)
    latest: dict[str, int] = {}
    for line in lines:
        if line.get("kind") == "call":
            latest[line["rollout_id"]] = max(latest.get(line["rollout_id"], 0), line["attempt"])
    expected = [line for line in lines if line.get("kind") == "call" and line["attempt"] == latest[line["rollout_id"]]]
    assert expected, "the export holds calls"
    for source, rid in ids.items():
        want = sorted((c for c in expected if c["rollout_id"] == source), key=lambda c: c["seq"])
        got = imported.list_model_calls(rid)
        assert [(c.prompt_token_ids, c.response_token_ids, c.response_logprobs) for c in got] == [
            (c["prompt_token_ids"], c["response_token_ids"], c["response_logprobs"]) for c in want
        ]
        assert [(c.flavour.value, c.policy_version, c.request, c.flags) for c in got] == [
            (c["flavour"], c["policy_version"], c["request"], c["flags"]) for c in want
        ]


def test_rewards_tasks_and_groups_come_back_as_exported(exported, imported):
    ids = _by_source(imported)
    rollouts = [line for line in _lines(exported) if line.get("kind") == "rollout"]
    assert {r["rollout_id"] for r in rollouts} == set(ids)
    for line in rollouts:
        stored = imported.get_rollout(ids[line["rollout_id"]])
        assert (stored.task, stored.group_id, stored.mode.value) == (line["task"], line["group_id"], line["mode"])
        rewards = [(r.value, r.name, r.final, r.source.value) for r in imported.list_rewards(stored.id)]
        assert rewards == [(r["value"], r["name"], r["final"], r["source"]) for r in line["rewards"]]
        assert build_trajectory(imported, stored.id).final_reward == line["reward"]


def test_the_sample_builder_makes_the_exported_training_rows_again(dashboard, exported, imported):
    lines = _lines(exported)
    rows: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        if line.get("kind") == "row":
            rows.setdefault(line["rollout_id"], []).append(line)
    assert rows, "the export holds training rows"
    ids = _by_source(imported)
    run_config = dashboard.store.get_run(dashboard.run_id).config  # the samples: settings the run trained with
    for source, want in rows.items():
        batch, _ = build_samples([build_trajectory(imported, ids[source])], sample_config(run_config))
        got = []
        for r in range(batch.num_rows):
            n = int(batch.attention_mask[r].sum())
            got.append({
                "input_ids": batch.input_ids[r, :n].tolist(),
                "loss_mask": [int(m) for m in batch.loss_mask[r, :n].tolist()],
                "old_logprobs": batch.old_logprobs[r, :n].tolist(),
                "reward": float(batch.row_reward[r]),
                "group_id": batch.group_ids[int(batch.row_group[r])],
            })  # fmt: skip
        keys = ("input_ids", "loss_mask", "old_logprobs", "reward", "group_id")
        assert got == [{k: row[k] for k in keys} for row in sorted(want, key=lambda row: row["index"])]
