"""The trace formats `alight data import` reads, by name: each turns files into sessions and per-record errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from alight_server.traces.formats import alight_export, claude_code, codex, openai_log
from alight_server.traces.model import Parsed

Reader = Callable[[Sequence[Path]], Parsed]


def _read_otel(files: Sequence[Path]) -> Parsed:
    """OTLP files; the OTLP parser (fastapi, protobuf) is imported here, so naming the formats in `alight --help`
    does not pay for it."""
    from alight_server.traces.formats import otel

    return otel.read(files)


READERS: dict[str, Reader] = {
    "otel": _read_otel,
    "openai": openai_log.read,
    "claude-code": claude_code.read,
    "codex": codex.read,
    "alight": alight_export.read,
}
