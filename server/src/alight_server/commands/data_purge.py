"""`alight data purge`: delete ended rollouts (by age, run or id) with every row and attempt log under them.

It opens the store itself (`--db` / `--config`, as `alight serve` does), so it runs with the server up or down.
What a running training still needs is never purged (store/retention.py says how that is known).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from alight.commands.exits import exit_with
from alight_server.commands.data_keys import store_target
from alight_server.commands.options import (
    AdminKeyOption,
    DbOption,
    JsonOption,
    LogsDirsOption,
    RunDirOption,
    ServerConfigOption,
)

if TYPE_CHECKING:
    from alight_server.store.base import PurgeScope
    from alight_server.store.purge import PurgeOutcome

DATE_HELP = "an ISO 8601 date or time, UTC unless it says otherwise (2026-11-01, 2026-11-01T12:00:00+02:00)"


def parse_when(value: str | None, option: str) -> datetime | None:
    """An ISO 8601 date or time; a date is its midnight, a time without an offset is UTC."""
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise typer.BadParameter(f"takes {DATE_HELP}; got {value!r}", param_hint=option) from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when


def purge(
    before: str | None = typer.Option(None, "--before", help=f"Rollouts that ended before this: {DATE_HELP}."),
    run: str | None = typer.Option(None, "--run", help="The rollouts of this training run (its id, as /ui lists it)."),
    rollout: str | None = typer.Option(
        None, "--rollout", help="This one rollout, erased everywhere: store rows, attempt logs in its run folder."
    ),
    steps_before: str | None = typer.Option(
        None, "--steps-before", help=f"Also the runs' step metrics reported before this: {DATE_HELP}."
    ),
    logs_dirs: LogsDirsOption = None,
    workspace_roots: list[Path] = typer.Option(
        [],
        "--workspaces",
        help="Where CLI agents' workspaces are made, besides $ALIGHT_WORKSPACE_ROOT (else $TMPDIR/alight-workspaces), "
        "which is always searched: the purged rollouts' workspaces there go too. Repeatable.",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Report what would be deleted; delete nothing."),
    vacuum: bool = typer.Option(
        True,
        "--vacuum/--no-vacuum",
        help="SQLite made before incremental vacuuming: rewrite the file once to give the space back (holds the "
        "write lock while it runs).",
    ),
    reason: str = typer.Option("alight data purge", "--reason", help="Kept in each tombstone; the API shows it."),
    db: DbOption = None,
    config: ServerConfigOption = None,
    admin_key: AdminKeyOption = None,
    run_dir: RunDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete ended rollouts and everything under them; leave a tombstone so the API answers 'purged on DATE'."""
    from alight_server.stacks.run_store import open_target
    from alight_server.store import NotFound, StoreError
    from alight_server.store.base import Conflict, Purged
    from alight_server.store.database import redacted_url
    from alight_server.store.purge import purge as run_purge

    scope, steps = _scope(before, run, rollout, steps_before, reason)
    target = store_target(db, config, admin_key, run_dir)
    try:  # the data keys open the rollouts' metadata, where the run folder of their attempt logs is
        store = open_target(target)
    except Exception as exc:  # a StoreOpenError, a KekError, a bad URL, an unreachable database, a missing driver
        raise exit_with(f"cannot open the store at {redacted_url(target.url)}: {exc}") from exc
    try:
        outcome = run_purge(
            store,
            scope,
            steps_before=steps,
            logs_dirs=logs_dirs or [],
            workspace_roots=workspace_roots,
            dry_run=dry_run,
            full_vacuum=vacuum,
        )
    except Purged as exc:  # erasing what is already erased: done
        typer.echo(f"nothing to do: {exc}")
        return
    except (NotFound, Conflict) as exc:
        raise exit_with(f"nothing purged: {exc}") from exc
    except StoreError as exc:  # the batches committed before it stay purged; running again goes on
        raise exit_with(f"purge stopped: {exc}; run it again to go on") from exc
    finally:
        store.close()
    summary = _summary(outcome, dry_run)
    typer.echo(json.dumps(summary) if as_json else "\n".join(_lines(summary)))


def _scope(
    before: str | None, run: str | None, rollout: str | None, steps_before: str | None, reason: str
) -> tuple[PurgeScope | None, datetime | None]:
    """What the options ask to purge: the rollouts' scope (None: no rollouts) and the step metrics' cut-off."""
    from alight_server.store.base import PurgeScope

    when = parse_when(before, "--before")
    steps = parse_when(steps_before, "--steps-before")
    if when is None and run is None and rollout is None:
        if steps is None:
            raise typer.BadParameter(
                "say what to purge: --before DATE, --run ID, --rollout ID (any together) or --steps-before DATE"
            )
        return None, steps
    return PurgeScope(before=when, run_id=run, rollout_id=rollout, reason=reason), steps


def _summary(outcome: PurgeOutcome, dry_run: bool) -> dict[str, Any]:
    """The report `--json` prints as it is, and `_lines` as text."""
    report = outcome.report
    return {
        "dry_run": dry_run,
        "deleted": {**report.deleted, "run_steps": outcome.steps},
        "rollouts": [rid for rid, _ in report.rollouts],
        "kept": report.kept,
        "folders": [str(f) for f in outcome.folders],
        "left": outcome.left,
        "bytes_before": outcome.size[0],
        "bytes_after": outcome.size[1],
    }


def _lines(summary: dict[str, Any]) -> list[str]:
    verb = "would delete" if summary["dry_run"] else "deleted"
    lines = [f"{verb} {len(summary['rollouts'])} rollouts; rows per table:"]
    lines += [f"  {table:<12} {count}" for table, count in summary["deleted"].items()]
    lines += [f"kept {count} rollouts: {why}" for why, count in summary["kept"].items()]
    lines.append(f"{verb} {len(summary['folders'])} folders (attempt logs, CLI workspaces)")
    lines += [f"  {folder}" for folder in summary["folders"]]
    lines += [f"could not remove {why}" for why in summary["left"]]
    if summary["bytes_before"]:
        lines.append(f"database: {summary['bytes_before']} -> {summary['bytes_after']} bytes")
    return lines
