"""A stand-in for vLLM's interpreter: started as `python -m vllm.entrypoints.openai.api_server ...`, it acts out
one start-up from $FAKE_VLLM_MODE, printing the lines vLLM 0.32 printed for that case on this machine.

Like vLLM it forks a child first (vLLM's engine core), whose pid goes to $FAKE_VLLM_CHILD_PID_FILE, so a
test can check that nothing is left behind.
"""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import time

# Copied from real vLLM 0.32 logs on this machine (see the tests that use them).
LINES = {
    "no-vllm": "/opt/venv/bin/python: Error while finding module specification for 'vllm.entrypoints.cli.main' "
    "(ModuleNotFoundError: No module named 'vllm')",
    "oom": "(Worker pid=2044) ERROR 12-01 10:11:50 [multiproc_executor.py:1063] ValueError: Available memory on "
    "node 0 (12.86/16.96 GiB) on kv cache allocation is less than requested memory for kv (200.0 GiB). Decrease "
    "--kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by other processes.",
    "bad-model": "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
    "  Value error, Invalid repository ID or local directory specified: '/models/tiny'.",
}


def main() -> None:
    mode = os.environ["FAKE_VLLM_MODE"]
    port = int(sys.argv[sys.argv.index("--port") + 1])
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.environ["FAKE_VLLM_CHILD_PID_FILE"], "w") as f:
        f.write(str(child.pid))
    print("INFO starting", flush=True)
    if mode in LINES:
        print(LINES[mode], file=sys.stderr, flush=True)
        sys.exit(1)
    if mode == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "hang":
        time.sleep(600)
    if mode == "serve":

        class Health(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200 if self.path == "/health" else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()

        http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()


if __name__ == "__main__":
    main()
