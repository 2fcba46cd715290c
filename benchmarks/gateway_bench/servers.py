"""The processes the gateway benchmark runs: the upstream double, a bare pass-through proxy, the gateway."""

from __future__ import annotations

import json
import time
from typing import Any

MODEL = "bench-policy"
ADMIN_KEY = "alk_bench"
REPLY_TOKENS = 32


def _upstream_body(stream: bool) -> list[bytes]:
    """One vLLM-shaped chat completion of REPLY_TOKENS tokens, whole or as SSE chunks."""
    ids = list(range(1000, 1000 + REPLY_TOKENS))
    content = [{"token": f" w{i}", "logprob": -0.5, "bytes": [32, 119], "top_logprobs": []} for i in ids]
    text = "".join(e["token"] for e in content)
    if not stream:
        body = {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 0,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": {"content": content},
                    "finish_reason": "stop",
                    "token_ids": ids,
                }
            ],
            "usage": {"prompt_tokens": 64, "completion_tokens": len(ids), "total_tokens": 64 + len(ids)},
            "prompt_token_ids": list(range(64)),
        }
        return [json.dumps(body).encode()]
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": MODEL}
    first = {
        **head,
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
        "prompt_token_ids": list(range(64)),
    }
    chunks = [first]
    for k, (i, e) in enumerate(zip(ids, content, strict=True)):
        last = k == len(ids) - 1
        choice = {"index": 0, "delta": {"content": e["token"]}, "logprobs": {"content": [e]}, "token_ids": [i]}
        choice["finish_reason"] = "stop" if last else None
        chunks.append({**head, "choices": [choice]})
    return [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]


async def _request_body(receive: Any) -> bytes:
    body = b""
    while True:
        msg = await receive()
        body += msg.get("body", b"")
        if not msg.get("more_body"):
            return body


def run_upstream(port: int, kind: str) -> None:
    """`raw`: one precomputed answer whatever was asked; `fake`: the vLLM-shaped test double."""
    import uvicorn

    if kind == "fake":  # a FastAPI app that tokenizes and generates
        from alight_testing import create_fake_upstream

        fake = create_fake_upstream(model=MODEL)
        uvicorn.run(fake, host="127.0.0.1", port=port, log_level="error", loop="uvloop", http="httptools")
        return
    plain, streamed = _upstream_body(False), b"".join(_upstream_body(True))

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await _request_body(receive)
        stream = b'"stream":true' in body.replace(b" ", b"")
        payload, kind = (streamed, b"text/event-stream") if stream else (plain[0], b"application/json")
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]})
        await send({"type": "http.response.body", "body": payload})

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", loop="uvloop", http="httptools")


def run_bare_proxy(port: int, up_port: int) -> None:
    """Pass every request through to the upstream as it is: no auth, no translation, no capture."""
    import aiohttp
    import uvicorn

    upstream = f"http://127.0.0.1:{up_port}"
    sessions: list[aiohttp.ClientSession] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = await _request_body(receive)
        if not sessions:  # bound to the server's loop, so made on the first request
            sessions.append(aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), auto_decompress=False))
        headers = {"content-type": "application/json"}
        async with sessions[0].request(scope["method"], upstream + scope["path"], data=body, headers=headers) as resp:
            kind = resp.headers.get("content-type", "application/json").encode()
            await send({"type": "http.response.start", "status": resp.status, "headers": [(b"content-type", kind)]})
            if not kind.startswith(b"text/event-stream"):
                await send({"type": "http.response.body", "body": await resp.read()})
                return
            async for piece in resp.content.iter_any():
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            await send({"type": "http.response.body", "body": b""})

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", loop="uvloop", http="httptools", lifespan="off")


def run_gateway(port: int, db_url: str) -> None:
    """The alight server as `alight serve` runs it (uvloop, the stamped HTTP protocol), on the benchmark's store."""
    import uvicorn

    from alight_server.app import create_app
    from alight_server.config import ServerConfig
    from alight_server.gateway.request.arrival import StampedHttp

    app = create_app(ServerConfig(db_url=db_url, admin_key=ADMIN_KEY, port=port))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", loop="uvloop", http=StampedHttp)


def wait_until_up(url: str) -> None:
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up within 60s")
