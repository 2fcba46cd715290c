"""Metrics sinks: JSONL and TensorBoard always; Weights & Biases or MLflow when configured."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from alight_server.trainer.config import MetricsConfig


class MetricsLog:
    """`log(step, {"train/reward_mean": 0.4, ...})` writes one record to every configured sink."""

    def __init__(self, run_dir: Path, config: MetricsConfig, run_config: dict[str, Any] | None = None) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.path = run_dir / "metrics.jsonl"
        self._file = self.path.open("a")
        self._tensorboard: Any = None
        self._wandb: Any = None
        self._mlflow: Any = None
        if config.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise RuntimeError("TensorBoard logging needs tensorboard: pip install 'alight-server[train]'") from exc
            self._tensorboard = SummaryWriter(str(run_dir / "tensorboard"))
        if config.wandb is not None:
            try:
                import wandb  # pyright: ignore[reportMissingImports]
            except ImportError as exc:
                raise RuntimeError("metrics.wandb is set but wandb is not installed: pip install wandb") from exc
            self._wandb = wandb.init(
                project=config.wandb.project, entity=config.wandb.entity, name=config.wandb.name, config=run_config
            )
        if config.mlflow is not None:
            try:
                import mlflow  # pyright: ignore[reportMissingImports]
            except ImportError as exc:
                raise RuntimeError("metrics.mlflow is set but mlflow is not installed: pip install mlflow") from exc
            if config.mlflow.tracking_uri:
                mlflow.set_tracking_uri(config.mlflow.tracking_uri)
            mlflow.set_experiment(config.mlflow.experiment)
            mlflow.start_run()
            self._mlflow = mlflow

    def log(self, step: int, values: Mapping[str, float]) -> None:
        self._file.write(json.dumps({"step": step, "time": time.time(), **values}) + "\n")
        self._file.flush()
        if self._tensorboard is not None:
            for key, value in values.items():
                self._tensorboard.add_scalar(key, value, step)
            self._tensorboard.flush()
        if self._wandb is not None:
            self._wandb.log(values, step=step)
        if self._mlflow is not None:
            self._mlflow.log_metrics({k.replace("/", "."): v for k, v in values.items()}, step=step)

    def close(self) -> None:
        self._file.close()
        if self._tensorboard is not None:
            self._tensorboard.close()
        if self._wandb is not None:
            self._wandb.finish()
        if self._mlflow is not None:
            self._mlflow.end_run()


def read_metrics(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
