"""Arguments and results on the execute_tool spans autogen-core already opens (no second span)."""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry import trace

from alight import semconv
from alight.integrations import clip_attribute


def enriched_run(run: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Wrap FunctionTool.run, which BaseTool.run_json calls inside autogen-core's `execute_tool <name>` span."""

    @functools.wraps(run)
    async def run_enriched(self: Any, args: Any, *rest: Any, **kwargs: Any) -> Any:
        span = trace.get_current_span()
        ours = getattr(span, "name", None) == f"{semconv.OP_EXECUTE_TOOL} {self.name}"
        if ours:
            arguments = args.model_dump(mode="json") if hasattr(args, "model_dump") else args
            span.set_attribute(semconv.GEN_AI_TOOL_CALL_ARGUMENTS, clip_attribute(_text(arguments)))
        result = await run(self, args, *rest, **kwargs)
        if ours:
            span.set_attribute(semconv.GEN_AI_TOOL_CALL_RESULT, clip_attribute(self.return_value_as_string(result)))
        return result

    return run_enriched


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
