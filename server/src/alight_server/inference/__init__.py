"""Embedded inference: a transformers model served OpenAI-style with token ids and logprobs."""

from __future__ import annotations

from alight_server.inference.models import load_policy, resolve_model

__all__ = ["load_policy", "resolve_model"]
