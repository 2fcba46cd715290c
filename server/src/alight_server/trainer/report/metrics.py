"""Metrics sinks: JSONL and TensorBoard always; Weights & Biases or MLflow when configured (trainer/report/tracking.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from alight_server.trainer.config.sections import MetricsConfig


class MetricsLog:
    """`log(step, {"train/reward_mean": 0.4, ...})` writes one record to every configured sink. `resume=True`
    continues the tracker runs named in `OUTPUT_DIR/tracking.json` instead of starting new ones."""

    def __init__(
        self,
        run_dir: Path,
        config: MetricsConfig,
        run_config: dict[str, Any] | None = None,
        *,
        resume: bool = False,
    ) -> None:
        from alight_server.trainer.report.tracking import MlflowSink, TrackingIds, WandbSink

        run_dir.mkdir(parents=True, exist_ok=True)
        self.path = run_dir / "metrics.jsonl"
        self._file = self.path.open("a")
        self._tensorboard: Any = None
        self.trackers: dict[str, WandbSink | MlflowSink] = {}
        try:
            if config.tensorboard:
                try:
                    from torch.utils.tensorboard import SummaryWriter
                except ImportError as exc:
                    raise RuntimeError(
                        "TensorBoard logging needs tensorboard: pip install 'alight-server[train]'"
                    ) from exc
                self._tensorboard = SummaryWriter(str(run_dir / "tensorboard"))
            ids = TrackingIds(run_dir)
            if config.wandb is not None:
                resume_id = ids.get("wandb") if resume else None
                self.trackers["wandb"] = WandbSink(config.wandb, run_dir, run_config or {}, resume_id)
            if config.mlflow is not None:
                resume_id = ids.get("mlflow") if resume else None
                self.trackers["mlflow"] = MlflowSink(config.mlflow, run_dir, run_config or {}, resume_id)
            for name, tracker in self.trackers.items():
                ids.set(name, tracker.run_id)
        except BaseException:
            self.close(ok=False)
            raise

    def log(self, step: int, values: Mapping[str, float]) -> None:
        self._file.write(json.dumps({"step": step, "time": time.time(), **values}) + "\n")
        self._file.flush()
        if self._tensorboard is not None:
            for key, value in values.items():
                self._tensorboard.add_scalar(key, value, step)
            self._tensorboard.flush()
        for tracker in self.trackers.values():
            tracker.log(step, values)

    def log_plot(self, path: Path, step: int) -> None:
        """The end-of-run plot, as an image or artifact of each tracker run (it is already on disk)."""
        for tracker in self.trackers.values():
            tracker.log_plot(path, step)

    def close(self, ok: bool = True) -> None:
        """Flush and end every sink; `ok=False` marks tracker runs as failed (a crash, Ctrl-C)."""
        self._file.close()
        if self._tensorboard is not None:
            self._tensorboard.close()
        while self.trackers:
            _, tracker = self.trackers.popitem()
            tracker.close(ok)
