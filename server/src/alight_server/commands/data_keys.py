"""`alight data rotate-key --new-kek SPEC`: re-wrap the store's data keys under a new key-encryption key.

It opens the database itself (`--db` / `--config`, as `alight serve` does, or an embedded run's folder with
`--run-dir`), so it runs with the server up or down; cells are not re-encrypted (store/keys/rotation.py).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from alight.commands.exits import exit_with
from alight_server.commands.options import (
    AdminKeyOption,
    DbOption,
    LogsDirsOption,
    RunDirOption,
    ServerConfigOption,
)
from alight_server.commands.serve import build_config

if TYPE_CHECKING:
    from alight_server.stacks.run_store import StoreTarget

KEK_HELP = "secret (ALIGHT_SECRET_KEY, else derived from the admin key), file:PATH or command:CMD"


def store_target(db: str | None, config: Path | None, admin_key: str | None, run_dir: Path | None) -> StoreTarget:
    """The store the options name and what opens it: a run's folder (its key, or --admin-key), else the server's
    settings (stacks/run_store.py opens it, as every reader of a store does)."""
    from pydantic import ValidationError

    from alight_server.stacks.run_store import StoreOpenError, StoreTarget, run_target

    setting = os.environ.get("ALIGHT_DATA_KEY", "").strip()
    if run_dir is not None:
        try:
            target = run_target(run_dir)
        except StoreOpenError as exc:
            raise typer.BadParameter(str(exc), param_hint="--run-dir") from exc
        return replace(target, admin_key=admin_key) if admin_key else target
    try:
        cfg = build_config(config, {"db_url": db, "admin_key": admin_key})
    except ValidationError as exc:
        raise typer.BadParameter(f"invalid server settings: {exc}", param_hint="--config") from exc
    return StoreTarget(cfg.db_url, cfg.admin_key, setting or cfg.data_key)


def rotate_key(
    new_kek: str = typer.Option(..., "--new-kek", help=f"The KEK to re-wrap every data key under: {KEK_HELP}."),
    old_kek: str | None = typer.Option(
        None, "--old-kek", help="The KEK the keys are wrapped under now (default: the server's data_key setting)."
    ),
    db: DbOption = None,
    config: ServerConfigOption = None,
    admin_key: AdminKeyOption = None,
    run_dir: RunDirOption = None,
    batch: int = typer.Option(50, "--batch", min=1, help="Data keys re-wrapped per transaction."),
    logs_dirs: LogsDirsOption = None,
) -> None:
    """Re-wrap every data key under a new key-encryption key (no cell is re-encrypted); new cells get a new key.

    Safe to interrupt: run it again with the same options to finish. Then restart every server, gateway replica
    and embedded run on the store with data_key set to the new KEK.
    """
    from alight_server.store.database import make_engine
    from alight_server.store.keys.kek import KekError, KekSource
    from alight_server.store.keys.keyring import SealError
    from alight_server.store.keys.rotation import rotate, rotate_logs

    target = store_target(db, config, admin_key, run_dir)
    try:
        new = KekSource.parse(new_kek, admin_key=target.admin_key)
        old = KekSource.parse(old_kek, admin_key=target.admin_key) if old_kek else target.kek_source()
        new.keys()  # a new KEK that cannot be read: said before the store is touched
    except KekError as exc:
        raise exit_with(f"cannot rotate: {exc}") from exc

    engine = make_engine(target.url)
    folders = [*(logs_dirs or []), *([run_dir / "logs"] if run_dir is not None else [])]
    try:
        report = rotate(
            engine, old, new, batch=batch, progress=lambda n, total: typer.echo(f"re-wrapped {n}/{total} data keys")
        )
        logs = rotate_logs(folders, old, new)
    except (KekError, SealError) as exc:
        raise exit_with(f"cannot rotate: {exc}") from exc
    finally:
        engine.dispose()
    if report.new_key is not None:
        typer.echo(f"new cells are sealed with data key {report.new_key}, wrapped under {new.describe()}")
    typer.echo(
        f"done: {report.rewrapped} data key(s) re-wrapped, {report.already} already under the new KEK"
        + (f", {report.process_keys} of a single process left as they are" if report.process_keys else "")
        + (f"; {logs[0]} sealed attempt log(s) re-wrapped, {logs[1]} already" if folders else "")
        + f". Restart every server, gateway and controller on this store with data_key: {new_kek}"
    )
