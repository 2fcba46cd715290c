"""JSON columns: what the gateway recorded comes back exactly, whichever encoder wrote it."""

from __future__ import annotations

import json
import math

import pytest

from alight_server.store.rows import dumps_recorded, loads


@pytest.mark.parametrize(
    "value",
    [
        {"choices": [{"message": {"content": "héllo ✓", "refusal": None}, "logprobs": None}]},
        [-0.5, -1.25e-9, 0.0],
        list(range(1500)),
        {"big": 2**70, "nested": [{"x": None}]},  # beyond orjson's 64-bit ints: the stdlib writes it
        {1: "int keys become strings, as the stdlib writes them"},
    ],
)
def test_recorded_json_round_trips(value: object) -> None:
    assert loads(dumps_recorded(value)) == json.loads(json.dumps(value))


def test_non_finite_logprobs_are_kept_not_nulled() -> None:
    value = {"logprobs": [-math.inf, -1.0], "refusal": None}
    text = dumps_recorded(value)
    assert "-Infinity" in text
    assert loads(text)["logprobs"][0] == -math.inf
