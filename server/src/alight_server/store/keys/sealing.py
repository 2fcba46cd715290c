"""Content cells at rest: each sealed with AES-GCM under a data key, bound to its table, row and column.

The cell's form, what it is bound to and which columns stay clear: docs/data.md "Encryption at rest".

A cell without the prefix is legacy plain text, written before schema 4: it is read as it is while the
store says it may hold some (`alight data encrypt` seals them and clears that mark), and refused after.
While it may, a cell that starts `enc1:` but names no data key of this store is legacy text too (a model
wrote text that looks sealed before schema 4: no key existed then): read as it is, and sealed by encrypt.
"""

from __future__ import annotations

import binascii
import os
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, Protocol

import pybase64
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import Table

from alight_server.store.base import SealError

PREFIX = "enc1:"
NONCE_BYTES = 12


class DataKeys(Protocol):
    """Where data keys come from (store/keys/keyring.py's Keyring)."""

    def current(self) -> tuple[str, bytes]:
        """(key id, 32-byte key) that new cells are sealed with."""
        ...

    def key(self, key_id: str) -> bytes:
        """The data key of this id; SealError when it is unknown or cannot be unwrapped."""
        ...

    def holds(self, key_id: str) -> bool:
        """Whether the store has a data key of this id (unwrappable or not)."""
        ...


@cache
def sealed_columns(table: Table) -> tuple[str, ...]:
    """The columns of `table` that hold content (marked `info["sealed"]` in store/tables.py)."""
    return tuple(c.name for c in table.columns if c.info.get("sealed"))


@cache
def identity(table: Table) -> tuple[str, ...]:
    """The columns whose values name a row, bound into each of its cells: `info["identity"]` or the primary key."""
    named = table.info.get("identity")
    return tuple(named) if named else tuple(c.name for c in table.primary_key.columns)


def _part(value: object) -> bytes:
    data = str(value).encode()
    return len(data).to_bytes(4, "big") + data  # length-prefixed: no two identities encode alike


@cache
def _aad_prefix(table: str, column: str) -> bytes:
    return b"alight-cell\0" + _part(table) + _part(column)


def describe(table: Table, ident: Sequence[Any]) -> str:
    """How a message names a row: `model_calls row id='c1'`."""
    return f"{table.name} row " + ", ".join(f"{n}={v!r}" for n, v in zip(identity(table), ident, strict=True))


class CellSealer:
    """Seals and opens the content cells of rows for one store; with no keys, writes clear (a benchmark's baseline).

    `clear_allowed`: legacy plain-text cells are read as they are (the store may still hold some).
    """

    def __init__(self, keys: DataKeys | None, *, clear_allowed: bool = False) -> None:
        self.keys = keys
        self.clear_allowed = clear_allowed or keys is None
        self._ciphers: dict[str, AESGCM] = {}

    @property
    def enabled(self) -> bool:
        return self.keys is not None

    def _cipher(self, key_id: str, key: bytes | None = None) -> AESGCM:
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            assert self.keys is not None
            cipher = self._ciphers[key_id] = AESGCM(key if key is not None else self.keys.key(key_id))
        return cipher

    def seal_row(self, table: Table, values: dict[str, Any], ident: Sequence[Any] | None = None) -> dict[str, Any]:
        """Seal, in place, the content cells of `values` (a row or an update); `ident` when `values` lacks it."""
        columns = sealed_columns(table)
        if self.keys is None or not columns:
            return values
        key_id, key = self.keys.current()
        cipher = self._cipher(key_id, key)
        head = f"{PREFIX}{key_id}:"
        if ident is None:
            ident = [values[name] for name in identity(table)]
        row_aad = b"".join(map(_part, ident))
        for column in columns:
            text = values.get(column)
            if text is None:
                continue
            nonce = os.urandom(NONCE_BYTES)
            sealed = cipher.encrypt(nonce, text.encode(), _aad_prefix(table.name, column) + row_aad)
            # pybase64 (SIMD): the stdlib's base64 cost ten times the cipher on a large body.
            values[column] = head + pybase64.b64encode_as_string(nonce + sealed)
        return values

    def open_row(self, table: Table, row: Mapping[Any, Any], ident: Sequence[Any] | None = None) -> dict[str, Any]:
        """The row as a column -> value dict with its content cells opened (SealError naming the row if one does not)."""
        values = dict(row)
        columns = [c for c in sealed_columns(table) if isinstance(values.get(c), str)]
        if not columns:
            return values
        if ident is None:
            ident = [values[name] for name in identity(table)]
        row_aad = b"".join(map(_part, ident))  # once per row: the sample builder opens many small cells
        for column in columns:
            values[column] = self.open_cell(table, ident, column, values[column], row_aad)
        return values

    def open_cell(
        self, table: Table, ident: Sequence[Any], column: str, cell: str, row_aad: bytes | None = None
    ) -> str:
        """The text a cell of this row and column holds; SealError naming the row when it does not open."""
        if not cell.startswith(PREFIX):
            if self.clear_allowed:
                return cell
            raise SealError(
                f"{describe(table, ident)} column {column} holds clear text in a store whose content is all "
                "sealed: it was written outside alight; restore the row from a backup or delete it"
            )
        colon = cell.find(":", len(PREFIX))
        key_id, body = cell[len(PREFIX) : colon], cell[colon + 1 :]
        if self.keys is None:
            raise SealError(
                f"{describe(table, ident)} column {column} is sealed, but the store was opened with sealing off"
            )
        cipher = self._ciphers.get(key_id)
        if cipher is None and self.clear_allowed and not self.keys.holds(key_id):
            return cell  # legacy text that only looks sealed: this store never had such a key
        if cipher is None:
            try:
                cipher = self._cipher(key_id)
            except SealError as exc:
                raise SealError(f"{describe(table, ident)} column {column}: {exc}") from None
        try:
            raw = memoryview(pybase64.b64decode(body, validate=True))
            if row_aad is None:
                row_aad = b"".join(map(_part, ident))
            opened = cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], _aad_prefix(table.name, column) + row_aad)
        except (binascii.Error, ValueError, InvalidTag):
            raise SealError(
                f"{describe(table, ident)} column {column} does not open under data key {key_id!r}: the cell was "
                "altered, or copied from another row or column; restore the row from a backup or delete it"
            ) from None
        return opened.decode()
