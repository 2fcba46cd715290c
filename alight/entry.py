# pyright: strict
"""`python -m alight.entry TARGET`: start one attempt of an entrypoint ("pkg.mod:fn" or "file.py:fn")."""

from __future__ import annotations

import asyncio
import gc
import importlib
import importlib.util
import inspect
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


def load_target(target: str) -> Callable[..., Any]:
    """Resolve "package.module:function" or "path/to/file.py:function" to the callable; a file's folder goes on
    sys.path first, so the agent's sibling imports work as they do under `python path/to/file.py`."""
    module_ref, sep, attr = target.rpartition(":")
    if not sep or not module_ref or not attr:
        raise ValueError(f"target {target!r} must look like 'package.module:function' or 'path/to/file.py:function'")
    if module_ref.endswith(".py") or "/" in module_ref or "\\" in module_ref:
        path = Path(module_ref).resolve()
        if not path.is_file():
            raise ValueError(f"target {target!r}: file {str(path)!r} does not exist")
        folder = str(path.parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        name = f"_alight_agent_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ValueError(f"target {target!r}: cannot import {str(path)!r} as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_ref)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"target {target!r}: {module_ref!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"target {target!r} is a {type(obj).__name__}, not a function")
    return obj


def run_target(target: str) -> int:
    """Run the entrypoint under the attempt context; the process exit code (0 ok, 1 failed)."""
    try:
        fn = load_target(target)
    except Exception:
        traceback.print_exc()
        return 1
    freeze_imports()
    return run_loaded(fn)


def freeze_imports() -> None:
    """Move every object that exists now (the agent's imports) out of the garbage collector's sight.

    An attempt's process runs one rollout and exits, and exit collects garbage over every tracked object: with
    `openai` and OpenTelemetry imported that walk alone is ~0.4 CPU-s, more than a short agent's own work. Frozen
    objects are still freed by reference counting (atexit handlers and thread joins still run); only cycles among
    the imports' objects are never collected, which a process this short never misses.
    """
    gc.freeze()  # no collection first: that would cost a full walk itself, for a little memory


def run_loaded(fn: Callable[..., Any]) -> int:
    """Run an entrypoint already imported (here, or before a preloaded start forked this process)."""
    from alight.decorator import is_rollout, rollout

    entry = fn if is_rollout(fn) else rollout(fn)
    try:
        result = entry()
        if inspect.isawaitable(result):
            asyncio.run(awaited(result))
    except BaseException as exc:
        if isinstance(exc, SystemExit):
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        traceback.print_exc()
        return 1
    return 0


async def awaited(awaitable: Any) -> Any:
    """`awaitable`'s result, as a coroutine for asyncio.run (which takes no other awaitable)."""
    return await awaitable


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m alight.entry 'package.module:function' | 'path/to/file.py:function'", file=sys.stderr)
        return 2
    return run_target(args[0])


if __name__ == "__main__":
    sys.exit(main())
