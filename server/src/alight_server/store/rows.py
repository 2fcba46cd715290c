"""Conversions between stored rows and the shared schemas, derived from the tables (store/tables.py).

A schema field and a column of the same name carry the same value, JSON columns encoded and content sealed here.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel
from sqlalchemy import DateTime, Row, Table

from alight.schemas import RolloutCreate
from alight_server.store.base import InvalidValue
from alight_server.store.keys.sealing import CellSealer, sealed_columns
from alight_server.store.tables import RECORDED_JSON

M = TypeVar("M", bound=BaseModel)


def now() -> datetime:
    return datetime.now(UTC)


def dumps(value: Any, what: str = "value") -> str:
    """Compact JSON of what a client sent; NaN and infinities are refused, not silently nulled."""
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        raise InvalidValue(f"{what} holds NaN or an infinity, which JSON cannot carry; send a finite number") from exc


def dumps_recorded(value: Any) -> str:
    """Compact JSON of what the gateway recorded: a -inf logprob is data and is kept as -Infinity.

    orjson (several times faster than the stdlib on the capture hot path) writes a non-finite float as null, so a value
    whose encoding holds a null is checked for one and, only then, encoded by the stdlib, which keeps it.
    """
    try:
        text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):  # an int beyond 64 bits, a type orjson does not know
        return json.dumps(value, separators=(",", ":"))
    if b"null" in text and _has_non_finite(value):
        return json.dumps(value, separators=(",", ":"))
    return text.decode()


def _has_non_finite(value: Any) -> bool:
    pending = [value]  # a loop, not recursion: a third of the cost on a response body
    while pending:
        item = pending.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, (list, tuple)):
            pending.extend(item)
    return False


def loads(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # -Infinity, NaN: valid for the stdlib, which wrote them
        return json.loads(text)


def utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything stored is UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def body_hash(item: RolloutCreate) -> str:
    body = item.model_dump(mode="json", exclude={"id"})
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


@cache
def _columns(table: Table) -> tuple[tuple[str, str | None, bool, bool], ...]:
    """(name, JSON kind or None, nullable, is a timestamp) of each column, as the table declares them."""
    return tuple((c.name, c.info.get("json"), bool(c.nullable), isinstance(c.type, DateTime)) for c in table.columns)


def _need_sealer(table: Table, sealer: CellSealer | None) -> None:
    if sealer is None and sealed_columns(table):
        raise TypeError(f"table {table.name} has sealed columns {sealed_columns(table)}: pass the store's sealer")


def values(
    table: Table, item: BaseModel | None = None, *, sealer: CellSealer | None = None, **given: Any
) -> dict[str, Any]:
    """The row for `item`: every column it has a field for, then `given` for the rest (winning over the item).

    Content columns come out sealed by `sealer`, which a table with such columns needs.
    """
    _need_sealer(table, sealer)
    fields = type(item).model_fields if item is not None else {}
    out: dict[str, Any] = {}
    for name, json_kind, nullable, _ in _columns(table):
        if name in given:
            value = given[name]
        elif name in fields:
            value = getattr(item, name)
        else:
            continue
        if json_kind is not None and not (value is None and nullable):
            if isinstance(value, BaseModel):
                value = value.model_dump(mode="json")
            value = dumps_recorded(value) if json_kind == RECORDED_JSON["json"] else dumps(value, name)
        elif isinstance(value, enum.Enum):
            value = value.value
        out[name] = value
    return sealer.seal_row(table, out) if sealer is not None else out


def from_row(
    model: type[M],
    table: Table,
    row: Row[Any] | Mapping[str, Any],
    *,
    sealer: CellSealer | None = None,
    **given: Any,
) -> M:
    """The schema object a stored row holds; `given` supplies fields the row lacks (a rollout's attempts).

    `row` is a SQLAlchemy row, or a column -> value mapping (a driver row, values already converted).
    Its content cells are opened by `sealer` (SealError naming the row when one does not open).
    """
    _need_sealer(table, sealer)
    m = row._mapping if isinstance(row, Row) else row
    if sealer is not None:
        m = sealer.open_row(table, m)
    found: dict[str, Any] = {}
    fields = model.model_fields
    for name, json_kind, _, timestamp in _columns(table):
        if name in fields and name in m:
            value = m[name]
            if json_kind is not None:
                value = loads(value)
            elif timestamp and value is not None:
                value = utc(value)
            found[name] = value
    for name in fields:  # columns from a join (a run's latest step) pass as they are
        if name not in found and name in m:
            found[name] = m[name]
    return model.model_validate({**found, **given})
