"""Metrics to MLflow (a real SQLite tracking store) and Weights & Biases (a real offline run), read back."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from wandb_records import config as wandb_config
from wandb_records import history, read_records

from alight_server.stacks.server_thread import free_port
from alight_server.trainer.config.run import ConfigError, parse_config
from alight_server.trainer.config.sections import MetricsConfig, MlflowConfig, WandbConfig
from alight_server.trainer.report.metrics import MetricsLog
from alight_server.trainer.report.plots import plot_run
from alight_server.trainer.report.tracking import TrackingIds

REPO = Path(__file__).parents[3]
RUN_CONFIG = {"model": "tiny", "optimizer": {"lr": 0.001, "betas": [0.9, 0.99]}, "server": {"url": None}}
STEPS = [
    (0, {"val/score": 0.25}),
    (1, {"train/reward_mean": 0.4, "train/loss": 1.5}),
    (2, {"train/reward_mean": 0.6, "train/loss": 1.25, "val/score": 0.5}),
]


def log_run(run_dir: Path, config: MetricsConfig, steps: list[tuple[int, dict[str, float]]], **kwargs: Any) -> None:
    """What a training run does with its MetricsLog: records per step, then the plot, then close."""
    metrics_log = MetricsLog(run_dir, config, RUN_CONFIG, **kwargs)
    rows = []
    for step, values in steps:
        metrics_log.log(step, values)
        rows.append({"step": step, **values})
    metrics_log.log_plot(plot_run(rows, run_dir / "training.png"), steps[-1][0])
    metrics_log.close()


def mlflow_client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def test_mlflow_run_holds_the_config_the_metrics_per_step_and_the_plot(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'tracking' / 'mlflow.db'}"
    (tmp_path / "tracking").mkdir()
    run_dir = tmp_path / "run"
    log_run(run_dir, MetricsConfig(tensorboard=False, mlflow=MlflowConfig(tracking_uri=uri, experiment="exp")), STEPS)

    client = mlflow_client(uri)
    run_id = TrackingIds(run_dir).get("mlflow")
    assert run_id is not None
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "run"  # the output folder's name
    assert client.get_experiment(run.info.experiment_id).name == "exp"
    assert run.data.params["optimizer.lr"] == "0.001"
    assert run.data.params["optimizer.betas"] == "[0.9, 0.99]"
    assert run.data.params["server.url"] == "null"
    reward = [(m.step, m.value) for m in client.get_metric_history(run_id, "train/reward_mean")]
    val = [(m.step, m.value) for m in client.get_metric_history(run_id, "val/score")]
    assert sorted(reward) == [(1, 0.4), (2, 0.6)]
    assert sorted(val) == [(0, 0.25), (2, 0.5)]
    assert [a.path for a in client.list_artifacts(run_id)] == ["training.png"]
    # artifacts sit beside the SQLite store, not in whatever folder the trainer was started from
    stored = list((tmp_path / "tracking" / "mlartifacts").rglob("training.png"))
    assert len(stored) == 1 and stored[0].read_bytes() == (run_dir / "training.png").read_bytes()


def test_mlflow_defaults_to_the_output_folder_and_resume_continues_the_same_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "run"
    config = MetricsConfig.model_validate({"tensorboard": False, "mlflow": True})
    log_run(run_dir, config, STEPS[:2])
    first_id = TrackingIds(run_dir).get("mlflow")
    # a run that crashed is recorded as failed, then --resume reopens it
    crashed = MetricsLog(run_dir, config, RUN_CONFIG, resume=True)
    crashed.close(ok=False)
    client = mlflow_client(f"sqlite:///{run_dir / 'mlflow.db'}")
    assert client.get_run(first_id).info.status == "FAILED"
    log_run(run_dir, config, STEPS[2:], resume=True)

    assert TrackingIds(run_dir).get("mlflow") == first_id
    assert len(client.search_runs([client.get_experiment_by_name("alight").experiment_id])) == 1
    assert client.get_run(first_id).info.status == "FINISHED"
    reward = [(m.step, m.value) for m in client.get_metric_history(first_id, "train/reward_mean")]
    assert sorted(reward) == [(1, 0.4), (2, 0.6)]
    assert list((run_dir / "mlartifacts").rglob("training.png"))
    assert not (tmp_path / "mlruns").exists()


def test_wandb_offline_run_records_each_metric_at_its_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import wandb

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-dir"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    (tmp_path / "wandb-dir").mkdir()
    run_dir = tmp_path / "run"
    log_run(run_dir, MetricsConfig(tensorboard=False, wandb=WandbConfig(project="alight-tests")), STEPS)
    # run.finish() returns once the run's exit is acknowledged, then tells wandb's service process it is done
    # without waiting: the service writes and closes the .wandb file after that (read at once, 6 of 70 files
    # held only their 7-byte header). The file is whole when the service has exited, as at the end of an
    # `alight train` process (wandb's exit hook); teardown() waits for that exit here (0 of 70 short).
    wandb.teardown()

    run_id = TrackingIds(run_dir).get("wandb")
    assert run_id
    files = list((tmp_path / "wandb-dir" / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb"))
    assert len(files) == 1, list((tmp_path / "wandb-dir").rglob("*"))
    records = read_records(files[0])
    rows = history(records)
    assert rows[0]["val/score"] == 0.25
    assert (rows[1]["train/reward_mean"], rows[1]["train/loss"]) == (0.4, 1.5)
    assert (rows[2]["train/reward_mean"], rows[2]["val/score"]) == (0.6, 0.5)
    assert rows[2]["plots/training/_type"] == "image-file"  # the plot, logged as an image at the last step
    image = files[0].parent / "files" / rows[2]["plots/training/path"]
    assert image.read_bytes() == (run_dir / "training.png").read_bytes()
    assert wandb_config(records)["optimizer"] == {"lr": 0.001, "betas": [0.9, 0.99]}
    assert not any(r.WhichOneof("record_type") == "exit" and r.exit.exit_code != 0 for r in records)


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        ({"mlflow": {"tracking_uri": "mlruns"}}, r"metrics\.mlflow\.tracking_uri: .*'mlruns' is not a tracking URI"),
        ({"mlflow": {"experimant": "x"}}, r"metrics\.mlflow\.experimant: unknown key"),
        ({"mlflow": {"experiment": ""}}, r"metrics\.mlflow\.experiment: .*at least 1 character"),
        ({"wandb": {"project": "team/proj"}}, r"metrics\.wandb\.project: .*cannot contain /.*'team/proj'"),
        ({"wandb": {"mode": "local"}}, r"metrics\.wandb\.mode: .*'online', 'offline' or 'disabled'.*got 'local'"),
        ({"wandb": "my-project"}, r"metrics\.wandb: .*valid dictionary"),
    ],
)
def test_bad_tracking_settings_are_named_with_their_key(tmp_path: Path, metrics: dict[str, Any], message: str) -> None:
    raw = {"model": "tiny", "dataset": {"train": "t.jsonl"}, "agent": {"entrypoint": "a.py:main"}, "metrics": metrics}
    with pytest.raises(ConfigError, match=message):
        parse_config(raw, tmp_path)


def test_switches_and_relative_sqlite_paths(tmp_path: Path) -> None:
    raw = {"model": "tiny", "dataset": {"train": "t.jsonl"}, "agent": {"entrypoint": "a.py:main"}}
    on = parse_config({**raw, "metrics": {"wandb": True, "mlflow": {"tracking_uri": "sqlite:///db/m.db"}}}, tmp_path)
    assert on.metrics.wandb == WandbConfig(project="alight")
    assert on.metrics.mlflow is not None
    assert on.metrics.mlflow.tracking_uri == f"sqlite:///{tmp_path / 'db' / 'm.db'}"  # like every config path
    off = parse_config({**raw, "metrics": {"wandb": False, "mlflow": False}}, tmp_path)
    assert off.metrics.wandb is None and off.metrics.mlflow is None
    server = parse_config({**raw, "metrics": {"mlflow": {"tracking_uri": "http://mlflow:5000"}}}, tmp_path)
    assert server.metrics.mlflow is not None and server.metrics.mlflow.tracking_uri == "http://mlflow:5000"


@pytest.mark.parametrize(("tracker", "distribution"), [("wandb", "wandb"), ("mlflow", "mlflow-skinny")])
def test_a_missing_tracker_library_names_the_extra_that_installs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tracker: str, distribution: str
) -> None:
    for module in (tracker, f"{tracker}.tracking", f"{tracker}.entities"):
        monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    config = MetricsConfig.model_validate({"tensorboard": False, tracker: True})
    with pytest.raises(RuntimeError, match=rf"metrics\.{tracker} is set .* pip install 'alight-server\[tracking\]'"):
        MetricsLog(tmp_path, config)
    extras = tomllib.loads((REPO / "server" / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert distribution in {re.split(r"[<>=!~\[; ]", req)[0] for req in extras["tracking"]}


def test_a_tracker_that_cannot_start_stops_the_run_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("WANDB_API_KEY", "WANDB_MODE", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc login
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    online = MetricsConfig(tensorboard=False, wandb=WandbConfig(project="p", mode="online"))
    with pytest.raises(RuntimeError, match=r"Weights & Biases could not start a run in project 'p': .*wandb login"):
        MetricsLog(tmp_path / "a", online)

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    uri = f"http://127.0.0.1:{free_port()}"  # no tracking server there
    unreachable = MetricsConfig(tensorboard=False, mlflow=MlflowConfig(tracking_uri=uri))
    with pytest.raises(RuntimeError, match=rf"MLflow could not start a run at '{uri}'"):
        MetricsLog(tmp_path / "b", unreachable)
