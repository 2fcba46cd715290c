"""MCP over streamable HTTP, stateless JSON replies: one JSON-RPC message in, its answer out (tools only).

The Model Context Protocol's HTTP transport lets a server answer each POST with plain JSON and no session, so an
environment needs no event loop of its own: `initialize`, `ping`, `tools/list` and `tools/call` are all a client
of any harness sends. A tool is a name, a description, a JSON schema and a function of its arguments that returns
text; a tool that raises `ToolRefused` answers with `isError` (the model sees why), never a protocol error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

LATEST_VERSION = "2025-06-18"
VERSIONS = frozenset({"2024-11-05", "2025-03-26", LATEST_VERSION})
METHOD_NOT_FOUND, INVALID_PARAMS, INVALID_REQUEST = -32601, -32602, -32600


class ToolRefused(Exception):
    """A tool call the environment will not run (an unknown tool, bad arguments): the model is told why."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    run: Callable[[dict[str, Any]], str]
    properties: dict[str, Any] | None = None  # argument name -> JSON schema; all of them required

    def listing(self) -> dict[str, Any]:
        props = self.properties or {}
        schema = {"type": "object", "properties": props, "required": sorted(props), "additionalProperties": False}
        return {"name": self.name, "description": self.description, "inputSchema": schema}


def answer(message: Any, tools: Callable[[], dict[str, Tool]], server_name: str) -> dict[str, Any] | None:
    """The JSON-RPC reply to one message (None for a notification, which gets HTTP 202 and no body); `tools` is
    called only for tools/list and tools/call (opening a game can take seconds: not for a handshake)."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        return _error(None, INVALID_REQUEST, "expected one JSON-RPC 2.0 request object (batches are not served)")
    if "id" not in message:
        return None  # notifications/initialized, cancelled, ...: nothing to answer
    rid, method, params = message["id"], message["method"], message.get("params")
    params = params if isinstance(params, dict) else {}
    if method == "initialize":
        asked = params.get("protocolVersion")
        return _result(rid, {
            "protocolVersion": asked if asked in VERSIONS else LATEST_VERSION,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": server_name, "version": "1"},
        })  # fmt: skip
    if method == "ping":
        return _result(rid, {})
    if method == "tools/list":
        return _result(rid, {"tools": [tool.listing() for tool in tools().values()]})
    if method == "tools/call":
        return _result(rid, _call(tools(), params))
    return _error(rid, METHOD_NOT_FOUND, f"method {method!r} is not served; this server has tools only")


def _call(tools: dict[str, Tool], params: dict[str, Any]) -> dict[str, Any]:
    name, arguments = params.get("name"), params.get("arguments") or {}
    tool = tools.get(name) if isinstance(name, str) else None
    try:
        if tool is None:
            raise ToolRefused(f"no tool {name!r}; the tools are {sorted(tools)}")
        if not isinstance(arguments, dict) or set(arguments) != set(tool.properties or {}):
            raise ToolRefused(f"{tool.name} takes exactly {sorted(tool.properties or {})}, got {arguments!r}"[:500])
        text, failed = tool.run(arguments), False
    except ToolRefused as exc:
        text, failed = str(exc), True
    return {"content": [{"type": "text", "text": text}], "isError": failed}


def _result(rid: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def _error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
