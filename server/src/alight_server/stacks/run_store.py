"""Opening a store to read it: a training run's by its folder, any other by its server's settings.

Every reader of a run's store opens it here, with the key its folder keeps (`stack.json`); a key that opens none
of a store's data keys is refused before the store is touched, since opening it would add a data key of its own and
every old cell would fail to open, one by one (docs/data.md, "Every process on a store opens it with the same KEK").
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from alight_server.stacks.state import STATE_FILE
from alight_server.store import open_store
from alight_server.store.database import make_engine
from alight_server.store.keys.kek import KEK_ENV, PROCESS_PREFIX, SETTING, KekSource
from alight_server.store.keys.keyring import wrapping_keks

if TYPE_CHECKING:
    from alight_server.store import Store

RUN_DB = "alight.db"


class StoreOpenError(ValueError):
    """A store that cannot be opened as asked; the message says which folder, file or option opens it."""


@dataclass(frozen=True)
class StoreTarget:
    """Where a store is and what opens it: `setting` is a `data_key` (`secret`, `file:PATH`, `command:CMD`) and
    derives from `admin_key` when `secret`; None is the default (ALIGHT_DATA_KEY, else the server secret, else a
    key of this process only). `run_dir` is the training run whose folder holds the store, when it is one."""

    url: str
    admin_key: str | None
    setting: str | None
    run_dir: Path | None = None

    def kek_source(self) -> KekSource:
        if self.setting is None:
            return KekSource.default(self.admin_key)
        return KekSource.parse(self.setting, admin_key=self.admin_key)


def run_setting() -> str:
    """The `data_key` an embedded run's server seals under (stacks/kinds.py): ALIGHT_DATA_KEY, else `secret`."""
    return os.environ.get(KEK_ENV, "").strip() or "secret"


def run_target(run_dir: Path) -> StoreTarget:
    """A training run's store (`alight.db` in its folder) with the key its server sealed it under."""
    try:
        admin_key = json.loads((run_dir / STATE_FILE).read_text())["admin_key"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreOpenError(
            f"{run_dir} is not a training run's folder (no readable {STATE_FILE}: {exc}): give the output_dir "
            "`alight train` wrote, or the store itself with --db"
        ) from exc
    return StoreTarget(f"sqlite:///{(run_dir / RUN_DB).resolve()}", admin_key, run_setting(), run_dir)


def sealing_run(url: str) -> Path | None:
    """The training run folder a SQLite store lies in (its `stack.json` beside it), else None."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    folder = Path(parsed.database).parent
    return folder if (folder / STATE_FILE).is_file() else None


def check_key(target: StoreTarget) -> None:
    """StoreOpenError, before the store is touched, when the target's KEK opens none of the store's data keys
    (a store without keys yet, or with only keys of a process that has ended, opens with any)."""
    source = target.kek_source()
    engine = make_engine(target.url)
    try:
        lasting = {k for k in wrapping_keks(engine) if not k.startswith(PROCESS_PREFIX)}
    finally:
        engine.dispose()
    if not lasting or lasting & set(source.ids()):
        return
    if target.run_dir is not None:
        raise StoreOpenError(
            f"the store of the training run in {_shown(target.run_dir)} is sealed under another key-encryption key "
            f"than {source.describe()} gives: open it with the {KEK_ENV} or ALIGHT_SECRET_KEY the run was trained with"
        )
    if (run_dir := sealing_run(target.url)) is not None:
        raise StoreOpenError(
            f"this store was sealed by the training run in {_shown(run_dir)}: open it with --run-dir {_shown(run_dir)}"
        )
    raise StoreOpenError(
        f"this store's data keys are wrapped under another key-encryption key ({', '.join(sorted(lasting))}) than "
        f"{source.describe()} gives ({', '.join(source.ids())}): open it with the settings of the server that "
        f"sealed it: --config, or --admin-key and {SETTING}"
    )


def open_target(target: StoreTarget) -> Store:
    """The store, its data keys under the target's KEK; StoreOpenError (or KekError) naming what opens it."""
    check_key(target)
    return open_store(target.url, target.kek_source())


def open_run_store(run_dir: Path) -> Store:
    """A training run's store, opened with what its folder keeps."""
    return open_target(run_target(run_dir))


@contextmanager
def served_run(run_dir: Path) -> Iterator[tuple[str, str]]:
    """A training run's store behind a server of this process on a free loopback port, for a reader that speaks
    the API (`alight data export --run-dir`): yields (its URL, the run's admin key, which it answers to)."""
    from alight_server.app import create_app
    from alight_server.config import ServerConfig
    from alight_server.stacks.server_thread import ServerThread

    target = run_target(run_dir)
    assert target.admin_key is not None and target.setting is not None  # a run's target names both
    store = open_target(target)
    try:
        config = ServerConfig(db_url=target.url, admin_key=target.admin_key, data_key=target.setting)
        with ServerThread(create_app(config, store=store)) as url:
            yield url, target.admin_key
    finally:
        store.close()


def _shown(folder: Path) -> str:
    """The folder as a person types it: relative to here when under it."""
    try:
        return str(folder.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(folder)
