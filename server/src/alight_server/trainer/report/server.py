"""The trainer's reports to the server: the run at start and end, and each step's metrics, for its dashboard.

A server that refuses or cannot be reached costs the run nothing: metrics.jsonl on disk stays the full record."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import httpx

from alight.client import AlightClient, ApiError
from alight.schemas import RunReport, RunStatus, RunStepReport

log = logging.getLogger("alight.trainer")


class RunReporter:
    """`start()` once, `step(n, metrics)` per recorded step, `finish(ok)` at the end; never raises."""

    def __init__(self, client: AlightClient, run_id: str, config: dict[str, Any], steps_planned: int) -> None:
        self.client = client
        self.run_id = run_id
        self.config = config
        self.steps_planned = steps_planned
        self.enabled = True

    def start(self) -> RunReporter:
        self._send(lambda: self.client.report_run(self._run(RunStatus.RUNNING)))
        return self

    def step(self, step: int, metrics: Mapping[str, float]) -> None:
        finite = {k: float(v) for k, v in metrics.items() if math.isfinite(v)}  # JSON has no NaN
        self._send(lambda: self.client.report_run_step(self.run_id, RunStepReport(step=step, metrics=finite)))

    def finish(self, ok: bool) -> None:
        self._send(lambda: self.client.report_run(self._run(RunStatus.SUCCEEDED if ok else RunStatus.FAILED)))

    def _run(self, status: RunStatus) -> RunReport:
        return RunReport(id=self.run_id, status=status, config=self.config, steps_planned=self.steps_planned)

    def _send(self, report: Any) -> None:
        if not self.enabled:
            return
        try:
            report()
        except (ApiError, httpx.HTTPError, ValueError) as exc:
            # An older server without /api/runs, or one that went away: stop asking, keep training.
            self.enabled = False
            log.warning(
                "the server did not take this run's report (%s); the dashboard will not show run %s", exc, self.run_id
            )
