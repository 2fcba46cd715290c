"""docs/data.md's "Every column" table against the schema: every column listed once, sealed exactly where sealed."""

from __future__ import annotations

import re
from pathlib import Path

from alight_server.store import tables as t

DOC = Path(__file__).resolve().parents[3] / "docs" / "data.md"
ROW = re.compile(r"^\| `(?P<table>\w+)` \| `(?P<column>\w+)` \| (?P<encrypted>[^|]+) \|")


def _documented() -> dict[tuple[str, str], str]:
    section = DOC.read_text().split("## Every column", 1)[1]
    rows: dict[tuple[str, str], str] = {}
    for line in section.splitlines():
        if match := ROW.match(line):
            key = (match["table"], match["column"])
            assert key not in rows, f"{key} listed twice in docs/data.md"
            rows[key] = match["encrypted"].strip()
    return rows


def test_every_column_of_the_store_is_listed_in_docs_data_md() -> None:
    columns = {(table.name, column.name) for table in t.metadata.sorted_tables for column in table.columns}
    assert set(_documented()) == columns


def test_the_documented_encryption_of_each_column_matches_its_sealed_marker() -> None:
    documented = _documented()
    for table in t.metadata.sorted_tables:
        for column in table.columns:
            said = documented[(table.name, column.name)]
            assert (said == "sealed") == bool(column.info.get("sealed")), f"{table.name}.{column.name}: {said}"
