"""The JSON depth limit: how deep a request body may nest, checked where bodies are parsed (gateway, API, OTLP JSON).

Deeper bodies parse, then fail later in a serialiser or a recursive walk (orjson refuses to write past 254 levels;
protobuf's JSON parser recurses per level): a 500 long after the request was accepted. Checking once, where the
body is read, turns that into a 400 that names the limit. A body with fewer opening brackets than the limit costs
two `bytes.count` calls; the rest (a CLI agent's: its tool schemas and content blocks alone pass 64) are walked
level by level, which is on the gateway's path for every such call.
"""

from __future__ import annotations

import contextlib
from typing import Any

import orjson

# Far past anything an agent, a framework or an OTLP exporter sends; well inside every parser used here.
MAX_JSON_DEPTH = 64


class TooDeep(ValueError):
    """A JSON body nests deeper than MAX_JSON_DEPTH; the message says so and names the limit."""

    def __init__(self, where: str) -> None:
        super().__init__(f"{where} nests JSON arrays/objects deeper than the limit of {MAX_JSON_DEPTH} levels")


def may_be_deep(raw: bytes) -> bool:
    """False when `raw` cannot nest past the limit: it has too few opening brackets."""
    return raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH


def check_depth(value: Any, where: str) -> None:
    """Raise TooDeep when parsed JSON `value` nests deeper than the limit (iterative: no recursion).

    One level at a time, the containers of the next collected in one comprehension per container: a
    wide body (a long agent conversation) costs under half of a walk that stacks (child, depth) pairs.
    `type(...) is` is exact here: orjson makes plain dicts and lists.
    """
    level = [value]
    for _ in range(MAX_JSON_DEPTH):
        deeper: list[Any] = []
        for item in level:
            if type(item) is dict:
                item = item.values()
            elif type(item) is not list:
                continue
            deeper += [child for child in item if type(child) is dict or type(child) is list]
        if not deeper:
            return
        level = deeper
    raise TooDeep(where)


def loads_within_depth(raw: bytes, where: str) -> Any:
    """`raw` parsed; TooDeep past the limit (ours, or orjson's own 1024), orjson.JSONDecodeError if not JSON."""
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):
            raise TooDeep(where) from None
        raise
    if may_be_deep(raw):
        check_depth(parsed, where)
    return parsed


def check_raw_depth(raw: bytes, where: str) -> None:
    """TooDeep for a raw JSON body past the limit; bodies that are not JSON are left to their parser."""
    if not may_be_deep(raw):
        return
    with contextlib.suppress(orjson.JSONDecodeError):
        loads_within_depth(raw, where)
