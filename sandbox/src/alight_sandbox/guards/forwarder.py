# pyright: strict
"""The sandbox's only way out: this attempt's model calls and MCP endpoint, to its gateway, with its token.

A CLI in the sandbox holds a placeholder key and talks to a relay on the sandbox's own loopback, which
pipes bytes to the socket this forwarder serves outside the sandbox (sandbox/src/alight_sandbox/guards/relay.py). Here each
request is parsed (h11) and held to one rule: the client names a path under its own attempt's base URL, never
a rollout or a host, and only the attempt's own endpoints there pass: the model calls (an origin-form POST to
one of their routes, or GET /v1/models) and, where the run serves an environment, POST /v1/mcp, its MCP
endpoint. The client's own credentials are dropped, the attempt token is added, and the call goes to the
attempt's gateway URL with its answer streamed back as it comes. Everything else (the rollout API, another
attempt's /gw/..., /admin, OTLP, odd spellings of an allowed path) is refused before any byte reaches the server.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import h11
import httpx

# The calls a model-calling agent makes; the gateway serves them under the attempt's base URL.
MODEL_CALLS = frozenset(
    {
        (b"POST", b"/v1/messages"),
        (b"POST", b"/v1/chat/completions"),
        (b"POST", b"/v1/responses"),
        (b"POST", b"/v1/completions"),
        (b"GET", b"/v1/models"),
    }
)
# The attempt's environment (docs/environments.md): MCP over streamable HTTP at its base URL's /mcp, mounted only
# where the run has `environment:` (elsewhere the gateway answers 404). The server is stateless, no session and
# no stream of its own: a client's POSTs are the whole protocol, and the GET (a server stream) or DELETE (a
# session's end) a client may try gets 405 here, as the server would answer it, without reaching the server.
MCP = b"/v1/mcp"
# What an agent may pass along: the body's type, the client's API version and beta flags, tracing, who is
# calling (the gateway's policy routing). Everything
# else, credentials of any spelling included, stays behind (an allowlist: a new header is dropped, not leaked).
PASSED_HEADERS = frozenset(
    {b"content-type", b"accept", b"user-agent", b"traceparent", b"tracestate", b"anthropic-version", b"anthropic-beta",
     b"x-alight-agent", b"x-alight-role", b"mcp-protocol-version"}
)  # fmt: skip
# The answer's headers minus the ones that describe this one connection (h11 frames the body itself).
CONNECTION_HEADERS = frozenset({b"connection", b"keep-alive", b"transfer-encoding", b"te", b"upgrade", b"trailer"})
QUERY = re.compile(rb"[A-Za-z0-9_.~=&+-]*")  # plain key=value pairs (Claude Code sends ?beta=true)
CHUNK = 65536


class Refused(Exception):
    """A request the forwarder answers itself, with `status` and a message naming the rule."""

    def __init__(self, status: int, message: str, headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
        super().__init__(message)
        self.status, self.headers = status, headers


def upstream_path(method: bytes, target: bytes) -> str:
    """The path after the gateway's /v1 for an allowed call (a model call with its query, or the MCP endpoint's
    POST); Refused otherwise."""
    if not target.startswith(b"/"):
        raise Refused(400, "only origin-form request targets (/v1/...) are forwarded")
    path, _, query = target.partition(b"?")
    if path == MCP:
        if method != b"POST":
            raise Refused(405, "the environment's MCP server is stateless: POST only", ((b"allow", b"POST"),))
        if query:
            raise Refused(400, "the MCP endpoint takes no query string")
        return MCP.decode().removeprefix("/v1")
    if (method, path) not in MODEL_CALLS:
        allowed = ", ".join(f"{m.decode()} {p.decode()}" for m, p in sorted(MODEL_CALLS))
        raise Refused(403, f"the sandbox reaches only this attempt's model calls ({allowed}) and POST {MCP.decode()}")
    if not QUERY.fullmatch(query):
        raise Refused(400, "the query string may hold only plain key=value pairs")
    suffix = path.decode().removeprefix("/v1")
    return f"{suffix}?{query.decode()}" if query else suffix


class Forwarder:
    """Serves one attempt's calls on a Unix socket; a context manager that runs it in a thread.

    >>> with Forwarder(Path("/tmp/x/gw.sock"), "http://127.0.0.1:8000/gw/r1/0/v1", token):
    ...     ...  # bind /tmp/x/gw.sock into the sandbox; its relay connects there
    """

    def __init__(
        self,
        socket_path: Path,
        gateway_url: str,
        token: str,
        *,
        max_head_bytes: int = 64 * 1024,
        max_body_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.socket_path = socket_path
        self.gateway_url = gateway_url.rstrip("/")  # the attempt's base URL, ending in /v1
        self.max_head_bytes, self.max_body_bytes = max_head_bytes, max_body_bytes
        self._auth = f"Bearer {token}".encode()
        # No read timeout: a model call may think for minutes; the attempt's own timeout bounds it.
        self._client = httpx.Client(timeout=httpx.Timeout(30.0, read=None))
        self._server: socketserver.ThreadingUnixStreamServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Forwarder:
        forwarder = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                forwarder.serve_connection(self.request)

        server = socketserver.ThreadingUnixStreamServer(str(self.socket_path), Handler)
        server.daemon_threads = True
        self.socket_path.chmod(0o600)  # the sandbox's user maps to ours; nobody else on the host
        self._server = server
        # A short poll: leaving the block (the CLI has exited) waits for at most one poll interval.
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="alight-forwarder", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self._client.close()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    def serve_connection(self, sock: socket.socket) -> None:
        """Requests on one connection, in turn (keep-alive), until the client closes or one is refused."""
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self.max_head_bytes)
        while True:
            try:
                request = self._next(conn, sock)
                if not isinstance(request, h11.Request):
                    return  # the client closed the connection
                # h11 bounds a head still arriving; one that arrived whole in a single read is measured here.
                if len(request.target) + sum(len(k) + len(v) + 4 for k, v in request.headers) > self.max_head_bytes:
                    raise Refused(431, f"request head over {self.max_head_bytes} bytes")
                path = upstream_path(request.method, request.target)
                body = self._body(conn, sock)
            except h11.RemoteProtocolError as exc:
                self._refuse(conn, sock, Refused(exc.error_status_hint, f"malformed request: {exc}"))
                return
            except Refused as refusal:
                self._refuse(conn, sock, refusal)
                return
            try:
                self._forward(conn, sock, request, path, body)
            except (OSError, httpx.HTTPError):
                # The client went away mid-answer (closing the upstream stream cancels the call), or the
                # gateway did: the answer is cut where it stopped, as the client would see a dropped stream.
                return
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()

    def _next(self, conn: h11.Connection, sock: socket.socket) -> object:
        while True:
            event = conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            conn.receive_data(sock.recv(CHUNK))

    def _body(self, conn: h11.Connection, sock: socket.socket) -> bytes:
        if conn.they_are_waiting_for_100_continue:  # curl's way with large bodies: it waits to be asked
            sock.sendall(conn.send(h11.InformationalResponse(status_code=100, headers=[])) or b"")
        parts: list[bytes] = []
        size = 0
        while True:
            event = self._next(conn, sock)
            if isinstance(event, h11.EndOfMessage):
                return b"".join(parts)
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size > self.max_body_bytes:
                    raise Refused(413, f"request body over {self.max_body_bytes} bytes")
                parts.append(bytes(event.data))
            elif isinstance(event, h11.ConnectionClosed):
                raise Refused(400, "the connection closed inside a request body")

    def _forward(self, conn: h11.Connection, sock: socket.socket, request: h11.Request, path: str, body: bytes) -> None:
        headers = [(k, v) for k, v in request.headers if k in PASSED_HEADERS]
        headers += [(b"authorization", self._auth), (b"accept-encoding", b"identity")]
        outgoing = self._client.build_request(
            request.method.decode(), self.gateway_url + path, headers=headers, content=body
        )
        try:
            answer = self._client.send(outgoing, stream=True)
        except httpx.HTTPError as exc:
            self._refuse(conn, sock, Refused(502, f"the attempt's gateway did not answer: {exc}"))
            return
        with contextlib.closing(answer):
            kept = [(k, v) for k, v in answer.headers.raw if k.lower() not in CONNECTION_HEADERS]
            sock.sendall(conn.send(h11.Response(status_code=answer.status_code, headers=kept)) or b"")
            for chunk in _raw(answer):
                sock.sendall(conn.send(h11.Data(data=chunk)) or b"")
            sock.sendall(conn.send(h11.EndOfMessage()) or b"")

    def _refuse(self, conn: h11.Connection, sock: socket.socket, refusal: Refused) -> None:
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return  # an answer is already under way: closing the connection is all that is left
        body = json.dumps({"error": {"type": "alight_forwarder", "message": str(refusal)}}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            *refusal.headers,
        ]
        with contextlib.suppress(OSError, h11.LocalProtocolError):
            sock.sendall(conn.send(h11.Response(status_code=refusal.status, headers=headers)) or b"")
            sock.sendall(conn.send(h11.Data(data=body)) or b"")
            sock.sendall(conn.send(h11.EndOfMessage()) or b"")


def _raw(answer: httpx.Response) -> Iterator[bytes]:
    """The answer's bytes as they arrive (a stream's events are not held back), cut into CHUNK-sized pieces."""
    for data in answer.iter_raw():
        for start in range(0, len(data), CHUNK):
            yield data[start : start + CHUNK]
