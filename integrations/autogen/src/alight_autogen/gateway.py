"""An OpenAIChatCompletionClient pointed at the current attempt's gateway."""

from __future__ import annotations

from typing import Any

from autogen_core.models import ModelInfo
from autogen_ext.models.openai import OpenAIChatCompletionClient

from alight.integrations import gateway_endpoint

# The policy is whatever model is being trained; AutoGen needs its capabilities spelled out for unknown names.
POLICY_MODEL_INFO = ModelInfo(
    vision=False, function_calling=True, json_output=False, family="unknown", structured_output=False
)


def gateway_model_client(model: str = "policy", **kwargs: Any) -> OpenAIChatCompletionClient:
    """A client on this attempt's gateway (its token as the key); outside a rollout, the client `kwargs` describe.

    `model_info` defaults to POLICY_MODEL_INFO (tool calling, no vision) unless given.
    """
    if (gateway := gateway_endpoint()) is not None:
        kwargs["base_url"], kwargs["api_key"] = gateway
    kwargs.setdefault("model_info", POLICY_MODEL_INFO)
    return OpenAIChatCompletionClient(model=model, **kwargs)
