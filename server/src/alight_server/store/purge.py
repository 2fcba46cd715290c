"""Retention: one purge (store rows, files on disk, freed space) and the server's task that runs it on a period.

The store decides which rollouts may go and deletes their rows (store/retention.py); the folders outside it that
go with each rollout are those docs/data.md "What a purge deletes" lists.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import stat
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol

from fastapi import FastAPI

from alight.attempt_logs import attempt_dir
from alight_server.config import RetentionConfig
from alight_server.store import Store
from alight_server.store.base import PurgeReport, PurgeScope
from alight_server.store.rows import now

log = logging.getLogger("alight.retention")

WORKSPACES = "alight.workspaces"  # the entry point group a package that makes attempt workspaces declares
RUN_LOGS = "logs"  # the local runner's logs folder inside a run folder (stacks/kinds.py: run_dir / "logs")


class WorkspaceKind(Protocol):
    """Where a package makes attempt workspaces, and whose each one is, so that a purge erases a rollout's."""

    def default_root(self) -> Path:
        """The folder the workspaces are made in unless told otherwise."""
        ...

    def rollout_of(self, folder_name: str) -> str | None:
        """The rollout a workspace folder under a root was made for; None for a folder that is not one."""
        ...


def workspace_kinds() -> list[WorkspaceKind]:
    """Every installed package's workspace kind (entry point group `alight.workspaces`)."""
    return [ep.load() for ep in sorted(entry_points(group=WORKSPACES), key=lambda ep: ep.name)]


@dataclass
class PurgeOutcome:
    """One purge: the store's report, the step metrics deleted, the folders erased, the database's bytes."""

    report: PurgeReport
    steps: int = 0
    folders: list[Path] = field(default_factory=list)  # removed (dry: would be)
    left: list[str] = field(default_factory=list)  # folders that could not be removed, each with why
    size: tuple[int, int] = (0, 0)  # bytes before and after (SQLite; 0, 0 elsewhere or dry)


def purge(
    store: Store,
    scope: PurgeScope | None,
    *,
    steps_before: datetime | None = None,
    logs_dirs: Sequence[Path] = (),
    workspace_roots: Sequence[Path] = (),
    dry_run: bool = False,
    full_vacuum: bool = True,
) -> PurgeOutcome:
    """Purge the rollouts in `scope` (None: none) and the step metrics reported before `steps_before`.

    Store errors (an unknown run or rollout, a rollout a running training needs) propagate unchanged.
    `full_vacuum`: on a SQLite store made before incremental vacuuming, rewrite the file once (a command
    an operator runs, not the server's periodic task: it holds the write lock for the whole rewrite).
    """
    report = store.purge_rollouts(scope, dry_run=dry_run) if scope is not None else PurgeReport(dry_run=dry_run)
    outcome = PurgeOutcome(report)
    if steps_before is not None:
        outcome.steps = store.purge_run_steps(steps_before, dry_run=dry_run)
    purged = {rid for rid, _ in report.rollouts}
    found = _log_folders(report.rollouts, logs_dirs) + _workspaces(purged, workspace_roots, workspace_kinds())
    found = [f for f in found if f.is_symlink() or f.is_dir()]
    if dry_run:
        outcome.folders = found
        return outcome
    for folder in found:
        try:
            _remove(folder)
        except OSError as exc:
            outcome.left.append(f"{folder}: {exc}")
            log.warning("purge could not remove %s: %s", folder, exc)
        else:
            outcome.folders.append(folder)
    if report.rollouts or outcome.steps:
        outcome.size = store.reclaim_space(full=full_vacuum)
    return outcome


def _remove(folder: Path) -> None:
    """Remove a folder and what it holds, links inside included (removed, not followed); a link itself unlinked."""
    if folder.is_symlink():
        folder.unlink()
        return

    def writable_and_again(func: Any, path: str, _exc: Any) -> None:  # a folder an agent made read-only
        os.chmod(os.path.dirname(path), stat.S_IRWXU)
        func(path)

    shutil.rmtree(folder, onerror=writable_and_again)


def _workspaces(rollout_ids: set[str], roots: Sequence[Path], kinds: Sequence[WorkspaceKind]) -> list[Path]:
    """The purged rollouts' workspaces under each kind's root and each root named, its folder names read once."""
    if not rollout_ids or not kinds:
        return []
    return [
        entry
        for root in dict.fromkeys([*(kind.default_root() for kind in kinds), *roots])
        if root.is_dir()
        for entry in sorted(root.iterdir())
        if any(kind.rollout_of(entry.name) in rollout_ids for kind in kinds)
    ]


def _log_folders(rollouts: Iterable[tuple[str, str | None]], logs_dirs: Sequence[Path]) -> list[Path]:
    found: dict[Path, None] = {}
    for rollout_id, run_dir in rollouts:
        bases = [*([Path(run_dir) / RUN_LOGS] if run_dir else []), *logs_dirs]
        found.update(dict.fromkeys(attempt_dir(base, rollout_id) for base in bases))
    return list(found)


def scheduled(config: RetentionConfig, at: datetime) -> tuple[PurgeScope | None, datetime | None]:
    """What the configured periods purge at time `at`: the rollouts ended before, the steps reported before."""
    scope = steps = None
    if config.content_days is not None:
        reason = f"retention: content kept {config.content_days:g} days after the rollout ended"
        scope = PurgeScope(before=at - timedelta(days=config.content_days), reason=reason)
    if config.step_metrics_days is not None:
        steps = at - timedelta(days=config.step_metrics_days)
    return scope, steps


def purge_once(store: Store, config: RetentionConfig) -> PurgeOutcome:
    """One round of the periodic purge, logged."""
    scope, steps = scheduled(config, now())
    outcome = purge(store, scope, steps_before=steps, full_vacuum=False)
    deleted = {table: n for table, n in outcome.report.deleted.items() if n}
    if deleted or outcome.steps:
        log.info(
            "retention purge: %d rollouts (%s), %d step metrics, %d folders (logs, workspaces); database %d -> %d bytes",
            len(outcome.report.rollouts), deleted, outcome.steps, len(outcome.folders), *outcome.size,
        )  # fmt: skip
    return outcome


async def _every(store: Store, config: RetentionConfig) -> None:
    while True:
        try:
            await asyncio.to_thread(purge_once, store, config)
        except Exception:  # the next round retries; a failed purge must not stop the server
            log.exception("retention purge failed; retrying in %g s", config.interval_s)
        await asyncio.sleep(config.interval_s)


def install(app: FastAPI, config: RetentionConfig) -> None:
    """Run the purge every `config.interval_s` (first at start-up) while the app is up; nothing when retention is off."""
    if not config.enabled():
        return
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            task = asyncio.create_task(_every(app.state.store, config), name="alight-retention")
            try:
                yield state
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    app.router.lifespan_context = lifespan
