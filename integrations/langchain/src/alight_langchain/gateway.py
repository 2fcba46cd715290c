"""A ChatOpenAI pointed at the current attempt's gateway, for code that passes base_url/api_key explicitly."""

from __future__ import annotations

from typing import Any

from langchain_openai import ChatOpenAI

from alight.integrations import gateway_endpoint


def gateway_chat_model(model: str = "policy", **kwargs: Any) -> ChatOpenAI:
    """ChatOpenAI on this attempt's gateway (its token as the key); outside a rollout, exactly ChatOpenAI(**kwargs).

    The gateway serves the policy being trained whatever `model` says; the name only shows in logs.
    Needs `langchain-openai` (`pip install langchain-openai`).
    """
    if (gateway := gateway_endpoint()) is not None:
        kwargs["base_url"], kwargs["api_key"] = gateway
    return ChatOpenAI(model=model, **kwargs)
