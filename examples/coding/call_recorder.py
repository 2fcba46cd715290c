"""Records the calls a project's own tests make into its code: run inside the sandbox, over the pristine checkout.

`python -s -P /opt/alight/call_recorder.py ROOT[:ROOT...] OUT.json SOURCE[:SOURCE...] -- PYTEST_ARGS...`

Standalone (standard library and pytest only); the codec comes from reference_runner.py, mounted beside it.
A profile hook sees every call into a SOURCE file and keeps those whose arguments have an exact JSON form:
per test, the calls a test file makes directly (the entry points it drives), and per function, the first
calls from anywhere (how the library calls its own helpers). The task generator reads OUT.json.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PER_FUNCTION = 64  # distinct calls kept per function, from any caller
PER_TEST = 32  # distinct entry-point calls kept per test
_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08


def _codec() -> Any:
    spec = importlib.util.spec_from_file_location("alight_reference_runner", HERE / "reference_runner.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def arguments(frame: Any) -> tuple[list[Any], dict[str, Any]]:
    """(positional, keyword) arguments of a call, read off its frame as the call begins."""
    code, local = frame.f_code, frame.f_locals
    names = code.co_varnames
    positional = [local[n] for n in names[: code.co_argcount]]
    keywords = {n: local[n] for n in names[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]}
    at = code.co_argcount + code.co_kwonlyargcount
    if code.co_flags & _CO_VARARGS:
        positional += list(local[names[at]])
        at += 1
    if code.co_flags & _CO_VARKEYWORDS:
        keywords |= local[names[at]]
    return positional, keywords


def is_test_file(path: str) -> bool:
    parts = Path(path).parts
    name = parts[-1] if parts else ""
    return bool({"test", "tests", "testing"} & set(parts[:-1])) or name.startswith("test_") or name == "conftest.py"


def _modules(encoded: Any) -> list[str]:
    """The modules an encoded value's references import."""
    if isinstance(encoded, list):
        return [m for item in encoded for m in _modules(item)]
    if isinstance(encoded, dict):
        return [str(encoded["m"])] if encoded.get("t") == "ref" else _modules(encoded.get("v"))
    return []


class Recorder:
    def __init__(self, sources: dict[str, str], codec: Any) -> None:
        self.sources = sources  # absolute path -> path relative to the checkout
        self.codec = codec
        self.by_test: dict[str, dict[str, Any]] = defaultdict(dict)
        self.by_function: dict[str, dict[str, Any]] = defaultdict(dict)

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event != "call" or frame.f_code.co_filename not in self.sources:
            return
        code = frame.f_code
        if "<" in code.co_qualname:
            return  # a lambda, comprehension or nested function: nothing outside can call it by name
        key = f"{self.sources[code.co_filename]}::{code.co_qualname}"
        caller = frame.f_back
        test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
        entry = caller is not None and test and is_test_file(caller.f_code.co_filename)
        if len(self.by_function[key]) >= PER_FUNCTION and not (entry and len(self.by_test[test]) < PER_TEST):
            return
        try:
            args, kwargs = arguments(frame)
            encoded = self.codec.encode([args, kwargs])
        except Exception:
            return  # not exactly representable: never recorded, never drawn from
        if any(is_test_file(getattr(sys.modules.get(m), "__file__", None) or "") for m in _modules(encoded)):
            return  # a test's own helper: absent where the check runs (no test file is there)
        text = json.dumps([key, encoded], sort_keys=True)
        if len(text) > 2000:
            return
        if len(self.by_function[key]) < PER_FUNCTION:
            self.by_function[key].setdefault(text, encoded)
        if entry and len(self.by_test[test]) < PER_TEST:
            self.by_test[test].setdefault(text, [key, encoded])

    def report(self) -> dict[str, Any]:
        return {
            "by_test": {t: list(calls.values()) for t, calls in sorted(self.by_test.items())},
            "by_function": {f: list(calls.values()) for f, calls in sorted(self.by_function.items())},
        }


def main() -> int:
    split = sys.argv.index("--")
    roots, out, sources = sys.argv[1].split(":"), sys.argv[2], sys.argv[3].split(":")
    args = sys.argv[split + 1 :]
    del sys.argv[1:]
    codec = _codec()
    import pytest

    sys.path.extend(root for root in roots if root not in sys.path)
    recorder = Recorder({str(Path(s).resolve()): s for s in sources}, codec)
    sys.setprofile(recorder)
    try:
        status = int(pytest.main(args))
    finally:
        sys.setprofile(None)
    Path(out).write_text(json.dumps(recorder.report(), sort_keys=True))
    return status


if __name__ == "__main__":
    sys.exit(main())
