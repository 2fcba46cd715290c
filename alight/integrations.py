"""What the framework integrations share, so all of them do it alike: their discovery (the `alight.integrations`
entry point), the gateway their model clients call, and tool arguments and results clipped on their spans."""

from __future__ import annotations

from importlib.metadata import entry_points

from alight.context import AttemptContext, current

MAX_ATTRIBUTE_CHARS = 8192  # tool arguments and results can be pages long; spans keep a readable head


def instrument_all() -> list[str]:
    """Call instrument() of every installed alight integration; return their names."""
    points = list(entry_points(group="alight.integrations"))
    for point in points:
        point.load()()
    return sorted(point.name for point in points)


def gateway_endpoint() -> tuple[str, str] | None:
    """(base URL, API key) of this attempt's gateway for an OpenAI-style client; None outside a rollout. The key is
    the attempt's token (any non-empty key where the controller gave none)."""
    ctx = current() or AttemptContext.from_env()
    if ctx is None or not ctx.gateway_base_url:
        return None
    return ctx.gateway_base_url, ctx.token or "alight"


def clip_attribute(text: str, limit: int = MAX_ATTRIBUTE_CHARS) -> str:
    """`text` as a span attribute value: its first `limit` characters, and how many more there were."""
    return text if len(text) <= limit else text[:limit] + f"...[{len(text) - limit} more chars]"
