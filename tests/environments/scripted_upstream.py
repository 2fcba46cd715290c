"""A scripted policy upstream for MCP environments: it answers each chat call with the script's next tool call.

The tiny model calls no tools, so a harness's tool wiring needs a policy that does: call k of a conversation (k
tool-call turns already in its messages) is answered with `script[k]` as one tool call, and a conversation past
the script's end with the text "Done.". Replies are vLLM-shaped with token ids and logprobs (the fake model's
tokenizer and wire format), so the gateway records every call as a trainable one. One call at a time per turn
keeps the game's actions in the script's order (harnesses run one turn's tool calls concurrently).
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response

from alight_testing.fake_model import FakeModel, FakeTokenizer, render_chat
from alight_testing.fake_wire import chat_response

MODEL = "scripted-player"


def create_scripted_upstream(script: list[tuple[str, dict[str, Any]]]) -> FastAPI:
    """`/v1/chat/completions` playing `script` (tool name, arguments); `app.state.calls` counts the calls."""
    tokenizer = FakeTokenizer()
    model = FakeModel(tokenizer)
    app = FastAPI(title="scripted MCP player")
    app.state.calls = 0

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "alight-test"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = orjson.loads(await request.body())
        if body.get("stream"):
            return Response(b'{"error": {"message": "the scripted player does not stream"}}', status_code=400)
        app.state.calls += 1
        messages = body["messages"]
        played = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        prompt = render_chat(messages, body.get("tools"))
        move = [script[played]] if played < len(script) else None
        choice = model.reply(prompt, "Done.", tool_calls=move, tagged=False)
        rid = "chatcmpl-" + hashlib.sha256(prompt.encode()).hexdigest()[:24]
        reply = chat_response(rid, MODEL, tokenizer.encode(prompt), [choice], body, tokenizer)
        return Response(orjson.dumps(reply), media_type="application/json")

    return app
