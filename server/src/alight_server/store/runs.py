"""Training runs in the SQL store: what each trainer reported at start and end, and its steps' metrics."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, func, select, update

from alight.schemas import Run, RunReport, RunStep, RunStepReport
from alight_server.store import rows
from alight_server.store import tables as t
from alight_server.store.base import NotFound
from alight_server.store.database import SqlDatabase

_LATEST_STEP = (
    select(t.run_steps.c.run_id, func.max(t.run_steps.c.step).label("step")).group_by(t.run_steps.c.run_id).subquery()
)


class SqlRuns(SqlDatabase):
    def report_run(self, report: RunReport) -> Run:
        values = rows.values(t.runs, report, sealer=self.sealer, updated_at=rows.now())
        del values["id"]
        with self._write() as conn:
            if conn.execute(update(t.runs).where(t.runs.c.id == report.id).values(**values)).rowcount == 0:
                conn.execute(t.runs.insert().values(id=report.id, created_at=values["updated_at"], **values))
            return self._run(conn, report.id)

    def get_run(self, run_id: str) -> Run:
        with self._read() as conn:
            return self._run(conn, run_id)

    def list_runs(self, limit: int = 100) -> list[Run]:
        with self._read() as conn:
            stmt = self._runs_select().order_by(t.runs.c.created_at.desc(), t.runs.c.id).limit(limit)
            return [rows.from_row(Run, t.runs, row, sealer=self.sealer) for row in conn.execute(stmt)]

    def add_run_step(self, run_id: str, report: RunStepReport) -> RunStep:
        with self._write() as conn:
            self._run(conn, run_id)
            s = t.run_steps.c
            where = (s.run_id == run_id) & (s.step == report.step)
            found = conn.execute(select(s.metrics).where(where)).scalar()
            metrics = {**(rows.loads(found) if found else {}), **report.metrics}
            values = rows.values(t.run_steps, metrics=metrics, created_at=rows.now())
            if found is None:
                conn.execute(t.run_steps.insert().values(run_id=run_id, step=report.step, **values))
            else:
                conn.execute(update(t.run_steps).where(where).values(**values))
            conn.execute(update(t.runs).where(t.runs.c.id == run_id).values(updated_at=values["created_at"]))
            return RunStep(run_id=run_id, step=report.step, metrics=metrics, created_at=values["created_at"])

    def list_run_steps(self, run_id: str) -> list[RunStep]:
        with self._read() as conn:
            self._run(conn, run_id)
            stmt = select(t.run_steps).where(t.run_steps.c.run_id == run_id).order_by(t.run_steps.c.step)
            return [rows.from_row(RunStep, t.run_steps, row) for row in conn.execute(stmt)]

    def _runs_select(self) -> Any:
        return select(t.runs, _LATEST_STEP.c.step).outerjoin(_LATEST_STEP, _LATEST_STEP.c.run_id == t.runs.c.id)

    def _run(self, conn: Connection, run_id: str) -> Run:
        row = conn.execute(self._runs_select().where(t.runs.c.id == run_id)).first()
        if row is None:
            raise NotFound(f"no run with id {run_id!r}; a trainer reports its run with POST /api/runs")
        return rows.from_row(Run, t.runs, row, sealer=self.sealer)
