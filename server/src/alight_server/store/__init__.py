"""Durable storage: the Store protocol and its SQLAlchemy implementation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from alight_server.store.base import Conflict, InvalidValue, NotFound, SchemaTooNew, Store, StoreError

if TYPE_CHECKING:
    from alight_server.store.keys.kek import KekSource

__all__ = ["Conflict", "InvalidValue", "NotFound", "SchemaTooNew", "Store", "StoreError", "open_store"]


def open_store(url: str, data_key: KekSource | None = None) -> Store:
    """Open (and create or migrate) the store at a SQLAlchemy URL, its data keys under `data_key`'s KEK
    (store/keys/kek.py; default: ALIGHT_DATA_KEY, else ALIGHT_SECRET_KEY, else a key of this process only)."""
    from alight_server.store.sql import SqlStore

    return SqlStore(url, data_key)
