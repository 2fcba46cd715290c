"""The trace formats `alight data import` reads, by name: each turns files into sessions and per-record errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from alight_server.traces.formats import alight_export, claude_code, codex, openai_log, otel
from alight_server.traces.model import Parsed

Reader = Callable[[Sequence[Path]], Parsed]

READERS: dict[str, Reader] = {
    "otel": otel.read,
    "openai": openai_log.read,
    "claude-code": claude_code.read,
    "codex": codex.read,
    "alight": alight_export.read,
}
