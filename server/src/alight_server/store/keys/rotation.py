"""Rotating the key-encryption key: every data key re-wrapped under the new KEK, no cell re-encrypted.

The steps, and why a run killed at any point loses no key and a second run finishes the rest:
docs/data.md "Rotating the KEK".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, update

from alight.attempt_logs import SEALED_SUFFIX
from alight_server.store import tables as t
from alight_server.store.keys.kek import PROCESS_PREFIX, SETTING, KekError, KekSource
from alight_server.store.keys.keyring import add_data_key, data_key_rows, unwrap, wrap
from alight_server.store.keys.sealed_logs import LogSeal, under_new_kek

DEFAULT_BATCH = 50


@dataclass(frozen=True)
class Rotation:
    """What a rotation did: keys re-wrapped now, keys it found under the new KEK already, the new data key."""

    rewrapped: int
    already: int
    new_key: str | None  # None: a run before this one (interrupted) added it
    process_keys: int  # keys of a process without a KEK (their cells never opened after it ended): left as they are


def rotate(
    engine: Engine,
    old: KekSource,
    new: KekSource,
    *,
    batch: int = DEFAULT_BATCH,
    progress: Callable[[int, int], None] | None = None,
) -> Rotation:
    """Re-wrap every data key of the store at `engine` from `old`'s KEKs to `new`'s first; KekError naming
    what to fix, before anything changes, when a key is wrapped under a KEK neither source has."""
    new_id, new_kek = new.ids()[0], new.keys()[0]
    with engine.begin() as conn:
        t.data_keys.create(conn, checkfirst=True)
    rows = data_key_rows(engine)
    lasting = [r for r in rows if not r.kek_id.startswith(PROCESS_PREFIX)]
    pending = [r for r in lasting if r.kek_id != new_id]
    old_keks = _old_keks(old, pending) if pending else {}
    new_key = None
    if not lasting or lasting[-1].kek_id != new_id:
        new_key, _ = add_data_key(engine, new_id, new_kek)
    done = 0
    for start in range(0, len(pending), batch):
        chunk = pending[start : start + batch]
        with engine.begin() as conn:
            for row in chunk:
                key = unwrap(old_keks[row.kek_id], row.id, row.wrapped)
                conn.execute(
                    update(t.data_keys)
                    .where(t.data_keys.c.id == row.id, t.data_keys.c.kek_id == row.kek_id)
                    .values(wrapped=wrap(new_kek, row.id, key), kek_id=new_id)
                )
        done += len(chunk)
        if progress is not None:
            progress(done, len(pending))
    return Rotation(
        rewrapped=len(pending),
        already=len(lasting) - len(pending),
        new_key=new_key,
        process_keys=len(rows) - len(lasting),
    )


def _old_keks(old: KekSource, pending: Sequence[Any]) -> dict[str, bytes]:
    """The old source's KEKs by fingerprint; KekError naming the keys none of them wrapped."""
    keks = dict(zip(old.ids(), old.keys(), strict=True))
    strangers = sorted({r.kek_id for r in pending} - set(keks))
    if strangers:
        ids = [r.id for r in pending if r.kek_id in strangers]
        raise KekError(
            f"{len(ids)} data key(s) ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''}) are wrapped under the "
            f"key-encryption key {', '.join(strangers)}, which the old KEK ({old.describe()}; fingerprint "
            f"{', '.join(keks)}) is not: give --old-kek the {SETTING} those keys were wrapped under (the server's "
            "data_key, with its ALIGHT_SECRET_KEY or admin key), nothing was changed"
        )
    return keks


def rotate_logs(folders: Sequence[Path], old: KekSource, new: KekSource) -> tuple[int, int]:
    """Re-wrap the key of every sealed attempt log under `folders` (`<n>.log.sealed`, store/keys/sealed_logs.py);
    (re-wrapped, already under the new KEK). Each file is replaced whole, so a killed run leaves each file
    under the old or the new KEK; running again finishes."""

    target, source = LogSeal(new), None
    moved = already = 0
    for folder in folders:
        for path in sorted(Path(folder).glob(f"*/*.log{SEALED_SUFFIX}")):
            if under_new_kek(path, target):
                already += 1
                continue
            source = source or LogSeal(old)  # read only when some file needs it: a finished rotation needs none
            source.rewrap(path, target)
            moved += 1
    return moved, already
