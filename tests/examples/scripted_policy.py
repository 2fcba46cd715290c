"""A scripted policy behind a real OpenAI-compatible chat completions endpoint (loopback HTTP).

Reply k of a conversation (k = assistant turns so far) is `replies[k]`; past the end it repeats the last.
`replies` may instead be a function of the request's messages (a policy that reads what the harness showed it).
Every request body is kept, so a test can check what the harness sent.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def bash_reply(command: str) -> str:
    """A reply in mini-swe-agent's text format: a thought, then one mswea_bash_command block."""
    return f"THOUGHT: next step.\n\n```mswea_bash_command\n{command}\n```"


@contextmanager
def scripted_policy(
    replies: list[str] | Callable[[list[dict[str, Any]]], str],
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(base URL ending in /v1, the request bodies received) while the server runs."""
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            received.append(body)
            if callable(replies):
                text = replies(body["messages"])
            else:
                turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
                text = replies[min(turn, len(replies) - 1)]
            answer = {
                "id": f"chatcmpl-{len(received)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "scripted"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
            }
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", received
    finally:
        server.shutdown()
        server.server_close()
