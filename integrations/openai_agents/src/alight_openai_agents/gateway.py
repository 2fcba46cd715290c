"""Point the Agents SDK at the current attempt's gateway, for code that builds its own OpenAI client."""

from __future__ import annotations

from agents import set_default_openai_client
from openai import AsyncOpenAI

from alight.integrations import gateway_endpoint


def gateway_client() -> AsyncOpenAI | None:
    """An AsyncOpenAI client on this attempt's gateway (its token as the key); None outside a rollout."""
    gateway = gateway_endpoint()
    if gateway is None:
        return None
    base_url, api_key = gateway
    return AsyncOpenAI(base_url=base_url, api_key=api_key)


def use_gateway() -> AsyncOpenAI | None:
    """Make the gateway client the SDK's default (models built without a client use it); None outside a rollout.

    Outside a rollout nothing changes, so the agent keeps talking to whatever it used before.
    """
    client = gateway_client()
    if client is not None:
        set_default_openai_client(client, use_for_tracing=False)
    return client
