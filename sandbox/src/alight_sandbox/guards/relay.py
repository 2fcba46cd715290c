"""In-sandbox relay: the sandbox's own 127.0.0.1:PORT piped to the forwarder's Unix socket, then the agent.

Run inside the sandbox as `python -I -S relay.py PORT SOCKET -- COMMAND...`: it listens first, then runs
COMMAND (the CLI) and exits with its status, so the CLI never starts before its endpoint exists. It only
moves bytes; every decision (which calls pass, the token) is the forwarder's, outside the sandbox.
Standard library only, and no imports of alight: it runs from a read-only mount with no site-packages.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import threading

CHUNK = 65536


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy until `source` ends, then end `sink`'s writing side (a half-close: the answer may still come)."""
    with contextlib.suppress(OSError):
        while data := source.recv(CHUNK):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def _connection(client: socket.socket, path: str) -> None:
    # Each piece goes out as it comes: with Nagle's algorithm a reply written in two pieces waited for
    # the client's delayed ACK, 40 ms per call (benchmarks/forwarder.py).
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with client, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as upstream:
        try:
            upstream.connect(path)
        except OSError as exc:
            print(f"alight relay: cannot reach the forwarder at {path}: {exc}", file=sys.stderr, flush=True)
            return
        back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
        back.start()
        _pipe(client, upstream)
        back.join()


def _accept(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_connection, args=(client, path), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--" or not argv[0].isdigit():
        print("usage: python -I -S relay.py PORT SOCKET -- COMMAND...", file=sys.stderr)
        return 2
    port, path, command = int(argv[0]), argv[1], argv[3:]
    listener = socket.create_server(("127.0.0.1", port), backlog=64)
    threading.Thread(target=_accept, args=(listener, path), daemon=True).start()
    child = subprocess.Popen(command)
    # The sandbox's init passes termination on to us; pass it on to the agent and wait for it.
    signal.signal(signal.SIGTERM, lambda signum, frame: child.send_signal(signum))
    code = child.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
