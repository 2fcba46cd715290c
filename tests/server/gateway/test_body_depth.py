"""The gateway's body parse holds the JSON depth limit exactly, however wide the body and wherever the deep branch."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from alight_server.gateway.errors import GatewayError
from alight_server.gateway.request.pipeline import parse_body
from alight_server.http.json_depth import MAX_JSON_DEPTH


def _nested(levels: int) -> Any:
    """A value whose containers nest `levels` deep, alternating objects and arrays."""
    value: Any = "leaf"
    for i in range(levels):
        value = [value] if i % 2 else {"k": value}
    return value


def _body(metadata: Any, turns: int = 0) -> bytes:
    """A request object (1 level) holding `metadata` under a key, after `turns` shallow content-block turns."""
    messages = [{"role": "user", "content": [{"type": "text", "text": f"turn {i}"}]} for i in range(turns)]
    return orjson.dumps({"model": "m", "messages": messages, "metadata": metadata})


@pytest.mark.parametrize("turns", [0, 200])  # 200 turns: far more brackets than the limit, every body is walked
def test_a_body_exactly_at_the_limit_parses_and_one_level_more_is_a_400_naming_it(turns: int) -> None:
    assert parse_body(_body(_nested(MAX_JSON_DEPTH - 1), turns))["model"] == "m"
    with pytest.raises(GatewayError) as refused:
        parse_body(_body(_nested(MAX_JSON_DEPTH), turns))
    assert refused.value.status == 400 and f"limit of {MAX_JSON_DEPTH} levels" in refused.value.message


def test_a_deep_branch_after_many_shallow_siblings_is_found() -> None:
    wide = [{"a": [1, {"b": 2}]} for _ in range(500)] + [_nested(MAX_JSON_DEPTH)]
    with pytest.raises(GatewayError) as refused:
        parse_body(_body(wide))
    assert refused.value.status == 400


def test_a_body_past_orjson_s_own_limit_is_the_same_400() -> None:
    raw = b'{"metadata": ' + b"[" * 2000 + b"]" * 2000 + b"}"
    with pytest.raises(GatewayError) as refused:
        parse_body(raw)
    assert refused.value.status == 400 and f"limit of {MAX_JSON_DEPTH} levels" in refused.value.message
