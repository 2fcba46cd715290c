"""JSON Lines files as the trace readers meet them: gzip by name, a truncated last line reported, not fatal."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from alight_server.traces.model import RecordError, TraceFormatError


def read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when its name ends in .gz (a gzip cut short: what did arrive)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TraceFormatError(f"cannot read {path}: {exc}") from exc
    if path.suffix != ".gz":
        return raw
    try:
        return gzip.decompress(raw)
    except (EOFError, OSError) as exc:
        try:
            return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS).decompress(raw)
        except zlib.error:
            raise TraceFormatError(f"{path} is not gzip ({exc}); name it without .gz if it is plain text") from exc


def read_text(path: Path) -> str:
    return read_bytes(path).decode("utf-8", errors="replace")


def base_suffix(path: Path) -> str:
    """The suffix that says the format, under a .gz: `spans.pb.gz` -> `.pb`."""
    suffixes = path.suffixes
    return suffixes[-2] if len(suffixes) > 1 and suffixes[-1] == ".gz" else path.suffix


def json_lines(path: Path, errors: list[RecordError]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each JSON object line; a line that is not one (a truncated last line) is an error."""
    for number, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            errors.append(RecordError(f"{path.name}:{number}", f"not a complete JSON line ({exc}); truncated file?"))
            continue
        if not isinstance(value, dict):
            errors.append(RecordError(f"{path.name}:{number}", f"expected a JSON object, got {type(value).__name__}"))
            continue
        yield number, value
