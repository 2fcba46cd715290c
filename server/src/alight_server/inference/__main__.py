"""`python -m alight_server.inference --model tiny --port 8001`: serve one model standalone.

Every route but /health needs a key: the API key opens /v1 (register it with the upstream), the admin
key every route, /admin/weights included (give it to the trainer as server.inference_admin_key). A key
not given (flag or environment) is read from --key-dir, or generated there (0600) and its path printed.
"""

from __future__ import annotations

import argparse
import os
import secrets
from pathlib import Path

API_KEY_ENV = "ALIGHT_INFERENCE_API_KEY"
ADMIN_KEY_ENV = "ALIGHT_INFERENCE_ADMIN_KEY"


def key_from(given: str | None, path: Path, what: str) -> str:
    """`given`, else the key stored at `path`, else a new one written there (0600); says which it used."""
    if given:
        return given
    stored = path.read_text().strip() if path.exists() else ""
    if stored:
        print(f"{what}: {path}", flush=True)
        return stored
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    print(f"{what} (generated): {path}", flush=True)
    return key


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m alight_server.inference", description=__doc__)
    parser.add_argument("--model", default="tiny", help="registered name (tiny, smollm2-135m) or a local HF directory")
    parser.add_argument("--served-model-name", default=None, help="name clients send as `model` (default: --model)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda when present)")
    parser.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument(
        "--prefix-cache-tokens", type=int, default=16384, help="prompt tokens kept for prefix reuse (0: off)"
    )
    parser.add_argument(
        "--no-overlap-prefill", action="store_true", help="prefill on the decode thread, not a second one"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (1 is fastest on a shared CPU)")
    parser.add_argument(
        "--api-key", default=os.environ.get(API_KEY_ENV), help=f"the bearer key for /v1 (or ${API_KEY_ENV})"
    )
    parser.add_argument(
        "--admin-key",
        default=os.environ.get(ADMIN_KEY_ENV),
        help=f"the bearer key for every route, /admin/weights included (or ${ADMIN_KEY_ENV})",
    )
    parser.add_argument(
        "--key-dir",
        type=Path,
        default=Path(".alight/inference"),
        help="where keys not given are read from or generated: api.key, admin.key (default .alight/inference)",
    )
    args = parser.parse_args(argv)
    api_key = key_from(args.api_key, args.key_dir.resolve() / "api.key", "api key (for /v1)")
    admin_key = key_from(args.admin_key, args.key_dir.resolve() / "admin.key", "admin key (for /admin)")

    import torch
    import uvicorn

    from alight_server.inference.engine import InferenceEngine
    from alight_server.inference.server import create_inference_app

    if args.threads:
        torch.set_num_threads(args.threads)
    engine = InferenceEngine.from_model_name(
        args.model,
        device=args.device,
        dtype=getattr(torch, args.dtype) if args.dtype else None,
        model_name=args.served_model_name or args.model,
        max_batch_size=args.max_batch_size,
        prefix_cache_tokens=args.prefix_cache_tokens,
        overlap_prefill=not args.no_overlap_prefill,
    )
    uvicorn.run(create_inference_app(engine, api_key=api_key, admin_key=admin_key), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
