"""`python -m alight_server.inference --model tiny --port 8001`: serve one model standalone."""

from __future__ import annotations

import argparse


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
    parser.add_argument("--admin-key", default=None, help="require this bearer key on /admin/weights")
    args = parser.parse_args(argv)

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
    uvicorn.run(create_inference_app(engine, admin_key=args.admin_key), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
