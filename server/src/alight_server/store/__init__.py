"""Durable storage: the Store protocol and its SQLAlchemy implementation."""

from alight_server.store.base import Conflict, InvalidValue, NotFound, SchemaTooNew, Store, StoreError

__all__ = ["Conflict", "InvalidValue", "NotFound", "SchemaTooNew", "Store", "StoreError", "open_store"]


def open_store(url: str) -> Store:
    """Open (and create or migrate) the store at a SQLAlchemy URL."""
    from alight_server.store.sql import SqlStore

    return SqlStore(url)
