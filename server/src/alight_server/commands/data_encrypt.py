"""`alight data encrypt`: seal the content a store kept in the clear before schema 4, resumable after a kill.

It opens the database itself (`--db` / `--config` as `alight serve` does, or an embedded run's folder with
`--run-dir`), with the data keys the server opens (its data_key and admin key), and may run while the server
is up: each batch is a short transaction of its own (store/keys/seal_existing.py).
"""

from __future__ import annotations

import typer

from alight.commands.exits import exit_with
from alight_server.commands.data_keys import store_target
from alight_server.commands.options import AdminKeyOption, DbOption, RunDirOption, ServerConfigOption


def encrypt(
    db: DbOption = None,
    config: ServerConfigOption = None,
    admin_key: AdminKeyOption = None,
    run_dir: RunDirOption = None,
    batch: int = typer.Option(200, "--batch", min=1, help="Rows sealed per transaction."),
) -> None:
    """Seal every content cell a store holds in the clear (written before schema 4); safe to interrupt and rerun.

    Run it with the data_key and admin key the server uses, so the server opens what it seals.
    """
    from alight_server.stacks.run_store import StoreOpenError, check_key
    from alight_server.store import StoreError
    from alight_server.store.keys.kek import KekError
    from alight_server.store.keys.seal_existing import seal_existing
    from alight_server.store.sql import SqlStore

    target = store_target(db, config, admin_key, run_dir)
    try:
        check_key(target)  # cells sealed now under a key the server cannot open: refused before any is
        store = SqlStore(target.url, target.kek_source())
    except (KekError, StoreError, StoreOpenError) as exc:
        raise exit_with(f"cannot encrypt: {exc}") from exc

    try:
        done = seal_existing(
            store, batch=batch, progress=lambda table, rows: typer.echo(f"{table}: {rows} rows sealed")
        )
    except StoreError as exc:
        raise exit_with(f"cannot encrypt: {exc}") from exc
    finally:
        store.close()
    if not done.rows:
        typer.echo("nothing to seal: every content cell of this store was written sealed (or sealed by an earlier run)")
        return
    total = sum(done.cells.values())
    per_table = ", ".join(f"{table} {n}" for table, n in done.cells.items() if n) or "none were clear"
    typer.echo(f"done: {total} content cells sealed ({per_table}); the store holds no content in the clear")
    if done.wal_truncated is False:
        typer.echo(
            "the SQLite WAL could not be emptied (a reader held it): it may still hold clear pages until the next "
            "checkpoint; run this command again once the server is idle"
        )
    if not store.is_sqlite:
        typer.echo(
            "PostgreSQL keeps the old row versions until the tables are rewritten: run VACUUM FULL on model_calls, "
            "spans, events, rollouts, attempts and runs (docs/data.md#encryption-at-rest)"
        )
