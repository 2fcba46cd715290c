"""Experiment trackers for metrics: Weights & Biases and MLflow, imported only when configured.

Each tracker run gets the config as parameters, every metric record at its step, and the end-of-run plot."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from alight_server.trainer.config.sections import MlflowConfig, WandbConfig

INSTALL_HINT = "pip install 'alight-server[tracking]'"
MLFLOW_PARAM_VALUE_MAX = 6000  # longer values are refused by the tracking store


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """{"optimizer": {"lr": 1e-5}} -> {"optimizer.lr": "1e-05"}; lists and nulls as JSON."""
    flat: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value if isinstance(value, str) else json.dumps(value)
    return flat


class TrackingIds:
    """The tracker run ids of one output folder, read back on `--resume`."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / "tracking.json"

    def get(self, tracker: str) -> str | None:
        return json.loads(self.path.read_text()).get(tracker) if self.path.is_file() else None

    def set(self, tracker: str, run_id: str) -> None:
        ids = json.loads(self.path.read_text()) if self.path.is_file() else {}
        self.path.write_text(json.dumps({**ids, tracker: run_id}, indent=2))


class WandbSink:
    """A W&B run: `wandb.init` with the config, `run.log(values, step=step)`, the plot as an image."""

    def __init__(self, config: WandbConfig, run_dir: Path, run_config: dict[str, Any], resume_id: str | None) -> None:
        try:
            import wandb  # pyright: ignore[reportMissingImports]
        except ImportError as exc:
            raise RuntimeError(f"metrics.wandb is set but wandb is not installed: {INSTALL_HINT}") from exc
        self._wandb = wandb
        try:
            self.run = wandb.init(
                project=config.project,
                entity=config.entity,
                name=config.name or run_dir.name,
                tags=config.tags or None,
                mode=config.mode,
                config=run_config,
                dir=os.environ.get("WANDB_DIR") or str(run_dir),
                id=resume_id,
                resume="allow" if resume_id else None,
                reinit="create_new",  # one process may train twice (tests, notebooks)
            )
        except Exception as exc:  # wandb raises its own error types for login, network and settings problems
            raise RuntimeError(
                f"Weights & Biases could not start a run in project {config.project!r}: {_sentence(exc)} "
                "Run `wandb login`, or set metrics.wandb.mode: offline (sync later with `wandb sync`)"
            ) from exc
        self.run_id: str = self.run.id

    def log(self, step: int, values: Mapping[str, float]) -> None:
        self.run.log(dict(values), step=step)

    def log_plot(self, path: Path, step: int) -> None:
        self.run.log({f"plots/{path.stem}": self._wandb.Image(str(path))}, step=step)

    def close(self, ok: bool) -> None:
        self.run.finish(exit_code=0 if ok else 1)


class MlflowSink:
    """An MLflow run through `MlflowClient` (no global active run): params, metrics per step, the plot."""

    def __init__(self, config: MlflowConfig, run_dir: Path, run_config: dict[str, Any], resume_id: str | None) -> None:
        try:
            from mlflow.entities import Metric, Param  # pyright: ignore[reportMissingImports]
            from mlflow.tracking import MlflowClient  # pyright: ignore[reportMissingImports]
        except ImportError as exc:
            raise RuntimeError(f"metrics.mlflow is set but mlflow is not installed: {INSTALL_HINT}") from exc
        self._metric = Metric
        uri = config.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{run_dir / 'mlflow.db'}"
        try:
            self.client = MlflowClient(tracking_uri=uri)
            if resume_id:
                self.run_id = resume_id
                self.client.update_run(resume_id, status="RUNNING")
                return  # params are already there, and MLflow refuses to change a logged param's value
            experiment = self.client.get_experiment_by_name(config.experiment)
            if experiment is not None:
                experiment_id = experiment.experiment_id
            else:
                experiment_id = self.client.create_experiment(config.experiment, _artifact_location(uri))
            run = self.client.create_run(experiment_id, run_name=config.run_name or run_dir.name)
            self.run_id = run.info.run_id
            params = [Param(k, v[:MLFLOW_PARAM_VALUE_MAX]) for k, v in flatten(run_config).items()]
            for start in range(0, len(params), 100):  # log_batch takes at most 100 params per call
                self.client.log_batch(self.run_id, params=params[start : start + 100])
        except Exception as exc:  # MlflowException, or a network error from a tracking server
            raise RuntimeError(f"MLflow could not start a run at {uri!r}: {_sentence(exc)}") from exc

    def log(self, step: int, values: Mapping[str, float]) -> None:
        now = int(time.time() * 1000)
        metrics = [self._metric(key, float(value), now, step) for key, value in values.items()]
        self.client.log_batch(self.run_id, metrics=metrics)

    def log_plot(self, path: Path, step: int) -> None:
        self.client.log_artifact(self.run_id, str(path))

    def close(self, ok: bool) -> None:
        self.client.set_terminated(self.run_id, status="FINISHED" if ok else "FAILED")


def _artifact_location(uri: str) -> str | None:
    """Artifacts beside a local SQLite store; MLflow's default would be ./mlruns under the working directory."""
    if not uri.startswith("sqlite:///"):
        return None  # a tracking server decides where its artifacts go
    return (Path(uri.removeprefix("sqlite:///")).parent / "mlartifacts").resolve().as_uri()


def _sentence(exc: BaseException) -> str:
    """A tracker's error message as one sentence ending in a period."""
    return (str(exc).strip().rstrip(".") or type(exc).__name__) + "."
