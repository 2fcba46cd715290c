"""Every span, attribute and event name alight writes or reads; nowhere else as literals."""

from __future__ import annotations

# Resource attributes: which rollout attempt a process works for.
RESOURCE_ROLLOUT_ID = "alight.rollout.id"
RESOURCE_ATTEMPT = "alight.attempt"
RESOURCE_MODE = "alight.mode"

# The root span opened by @alight.rollout.
SPAN_ROLLOUT = "alight.rollout"
ATTR_ROLLOUT_ID = "alight.rollout.id"
ATTR_ATTEMPT = "alight.attempt"

# Rewards travel as span events.
EVENT_REWARD = "alight.reward"
ATTR_REWARD_VALUE = "alight.reward.value"
ATTR_REWARD_NAME = "alight.reward.name"
ATTR_REWARD_FINAL = "alight.reward.final"
# Optional link from a reward to the model call it scores (a step reward).
ATTR_REWARD_MODEL_CALL_ID = "alight.reward.model_call_id"

# Free-form events from alight.emit(name, **attributes), and agent errors.
EVENT_EMIT = "alight.event"
ATTR_EVENT_NAME = "alight.event.name"
EVENT_EXCEPTION = "exception"  # the OpenTelemetry name; record_exception() writes it

# OpenTelemetry GenAI conventions (model calls, agents, tools).
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"

# Values of gen_ai.operation.name.
OP_CHAT = "chat"
OP_TEXT_COMPLETION = "text_completion"
OP_INVOKE_AGENT = "invoke_agent"
OP_EXECUTE_TOOL = "execute_tool"

# Framework concepts that have no GenAI name yet.
ATTR_FRAMEWORK = "alight.framework"
ATTR_HANDOFF_FROM = "alight.handoff.from"
ATTR_HANDOFF_TO = "alight.handoff.to"
ATTR_GRAPH_NODE = "alight.graph.node"
ATTR_GUARDRAIL_NAME = "alight.guardrail.name"
ATTR_GUARDRAIL_TRIGGERED = "alight.guardrail.triggered"
ATTR_MCP_METHOD = "mcp.method.name"

# HTTP headers the gateway reads.
HEADER_TRACEPARENT = "traceparent"
# Several policies: who is calling, for the gateway's routing (it sees a call before the call's span).
HEADER_AGENT = "x-alight-agent"
HEADER_ROLE = "x-alight-role"
