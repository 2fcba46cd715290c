"""The store's data keys: random 32-byte keys that seal content cells, kept only wrapped by a key-encryption key.

Each data key is a row of `data_keys`: its id, the key sealed with AES-GCM under a KEK (store/keys/kek.py; the
key's id bound as associated data, so a wrapped key copied to another id does not open) and that KEK's
fingerprint. New cells are sealed with the newest key this store's KEK opens (`current`); any key opens the
cells sealed with it (`key`). Rotating the KEK (store/keys/rotation.py) re-wraps these rows, never the cells.
"""

from __future__ import annotations

import base64
import logging
import secrets
import threading
from collections.abc import Sequence
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import Engine, insert, inspect, select
from sqlalchemy.pool import StaticPool

from alight_server.store import tables as t
from alight_server.store.base import SealError
from alight_server.store.keys.kek import PROCESS_PREFIX, SETTING, KekSource
from alight_server.store.rows import now

log = logging.getLogger("alight.store")

ROTATE = "alight data rotate-key"


def wrap(kek: bytes, key_id: str, key: bytes) -> str:
    """`key` sealed under `kek`, bound to `key_id`: base64 of nonce (12 bytes) + ciphertext + tag."""
    nonce = secrets.token_bytes(12)
    return base64.b64encode(nonce + AESGCM(kek).encrypt(nonce, key, _bound(key_id))).decode()


def unwrap(kek: bytes, key_id: str, wrapped: str) -> bytes:
    """The data key `key_id`; SealError when the wrapped value was altered, moved or wrapped under another KEK."""
    try:
        blob = base64.b64decode(wrapped, validate=True)
        return AESGCM(kek).decrypt(blob[:12], blob[12:], _bound(key_id))
    except (InvalidTag, ValueError) as exc:
        raise SealError(
            f"data key {key_id!r} does not open under its key-encryption key: its row in data_keys was altered "
            "or copied from another key; restore the row from a backup"
        ) from exc


def add_data_key(engine: Engine, kek_id: str, kek: bytes) -> tuple[str, bytes]:
    """A fresh random data key stored wrapped under `kek` (fingerprint `kek_id`), in a transaction of its own."""
    key_id, key = secrets.token_hex(8), AESGCM.generate_key(bit_length=256)
    with engine.begin() as conn:
        row = {"id": key_id, "wrapped": wrap(kek, key_id, key), "kek_id": kek_id, "created_at": now()}
        conn.execute(insert(t.data_keys).values(**row))
    return key_id, key


def data_key_rows(engine: Engine) -> Sequence[Any]:
    """(id, wrapped, kek_id) of every data key, oldest first."""
    d = t.data_keys.c
    with engine.connect().execution_options(alight_read=True) as conn:  # BEGIN, not BEGIN IMMEDIATE
        return conn.execute(select(d.id, d.wrapped, d.kek_id).order_by(d.created_at, d.id)).all()


def _bound(key_id: str) -> bytes:
    return b"alight-data-key\0" + key_id.encode()


class Keyring:
    """The data keys one store's KEK source opens, unwrapped once and cached."""

    def __init__(self, engine: Engine, source: KekSource) -> None:
        self._engine = engine
        self.source = source
        self._keks = dict(zip(source.ids(), source.keys(), strict=True))  # KekError when unreadable
        self._wrap_id = source.ids()[0]
        self._keys: dict[str, bytes] = {}
        self._foreign: dict[str, str] = {}  # key id -> the fingerprint of the KEK it is wrapped under
        self._current: tuple[str, bytes] | None = None
        self._lock = threading.Lock()

    @classmethod
    def open(cls, engine: Engine, source: KekSource) -> Keyring:
        """The keyring of the store at `engine`: creates `data_keys` and a first key this source wraps if none.

        Call it outside any transaction of the store (it may write); `current` and `key` never write.
        """
        ring = cls(engine, source)
        with engine.begin() as conn:
            t.data_keys.create(conn, checkfirst=True)
        ring._load()
        if ring._current is None:
            lasting = [k for k, kek in ring._foreign.items() if not kek.startswith(PROCESS_PREFIX)]
            if lasting:
                log.warning(
                    "this store's data keys %s are wrapped under another key-encryption key than %s: cells "
                    "sealed under them will not open; a new data key is made for new cells. Open the store with "
                    "the %s they were wrapped under, or re-wrap them with `%s`",
                    ", ".join(lasting[:5]), source.describe(), SETTING, ROTATE,
                )  # fmt: skip
            ring.add_key()
        return ring

    def current(self) -> tuple[str, bytes]:
        assert self._current is not None  # set by `open`
        return self._current

    def key(self, key_id: str) -> bytes:
        """The data key `key_id`; SealError naming it when this store has no such key or cannot unwrap it."""
        # Not loaded yet: another process may have added it (not so in an in-memory store).
        if key_id not in self._keys and not isinstance(self._engine.pool, StaticPool):
            with self._lock:
                self._load()
        if (found := self._keys.get(key_id)) is not None:
            return found
        if key_id in self._foreign:
            raise SealError(
                f"data key {key_id!r} is wrapped under the key-encryption key {self._foreign[key_id]}, but this "
                f"store was opened with {self.source.describe()} (key {', '.join(self._keks)}): open it with the "
                f"{SETTING} that key was wrapped under, or finish an interrupted rotation with `{ROTATE}`"
            )
        raise SealError(
            f"no data key {key_id!r} in this store's data_keys: the cell was sealed in another store, or the key "
            "was deleted"
        )

    def holds(self, key_id: str) -> bool:
        if key_id in self._keys or key_id in self._foreign:
            return True
        with self._lock:
            self._load()
        return key_id in self._keys or key_id in self._foreign

    def add_key(self) -> tuple[str, bytes]:
        """A new data key wrapped under this source's first KEK; it becomes `current`. Outside any transaction."""
        self._current = add_data_key(self._engine, self._wrap_id, self._keks[self._wrap_id])
        self._keys[self._current[0]] = self._current[1]
        return self._current

    def _load(self) -> None:
        for key_id, wrapped, kek_id in data_key_rows(self._engine):
            kek = self._keks.get(kek_id)
            if kek is None:
                self._foreign[key_id] = kek_id
                continue
            self._foreign.pop(key_id, None)
            if key_id not in self._keys:
                self._keys[key_id] = unwrap(kek, key_id, wrapped)
            self._current = (key_id, self._keys[key_id])


def wrapping_keks(engine: Engine) -> set[str]:
    """The fingerprints of the KEKs the store's data keys are wrapped under (none for a store without keys yet).
    Only reads: a reader checks its KEK with it before `Keyring.open`, which would add a key of its own."""
    with engine.connect().execution_options(alight_read=True) as conn:
        if not inspect(conn).has_table(t.data_keys.name):
            return set()
        return set(conn.execute(select(t.data_keys.c.kek_id).distinct()).scalars())
