"""Differential runner mounted read-only into the sandbox: calls one tree's functions on given inputs, prints results.

`python -s -P /opt/alight/reference_runner.py ROOT[:ROOT...] INPUTS.json`

Standalone on purpose (standard library only), like pytest_runner.py beside it; the grader, the task generator's
call recorder and this runner share its codec. Values travel as JSON: plain JSON for None, bools, numbers,
strings and lists, tagged objects for the rest (`{"t": "tuple", "v": [...]}`), and a function or class as the
name it is imported by (`{"t": "ref", "m": "operator", "q": "add"}`). Nothing is ever unpickled.

Each call runs with `random` seeded the same way and a CPU-time limit; its outcome is the canonical form of
what it returned (an iterator as its first items, any other object as its type and attributes), of its
arguments afterwards (a function that mutates its input is compared on that too), or the exception's type.
The project's stdout is sent to stderr: the results are the last line of stdout, written through a
descriptor duplicated before any project code was imported.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import random
import resource
import signal
import sys
from typing import Any

MAX_DEPTH = 6
MAX_ITEMS = 64  # items kept of a list, dict or iterator in an outcome
_SCALARS = (type(None), bool, int, str)
_ABSENT = object()
_BUILTINS = (str, bytes, int, float, tuple, list, dict, set, frozenset)


class Unencodable(ValueError):
    """A value with no faithful JSON form (an open file, a lambda, an instance): the call is not recorded."""


class CallTimeout(BaseException):
    """Raised in a call that used up its CPU time (BaseException: the project's `except Exception` misses it)."""


def qualified(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__qualname__)}"


def encode(value: Any, depth: int = 0) -> Any:
    """An input value as tagged JSON, exactly; Unencodable when there is no such form."""
    if depth > MAX_DEPTH:
        raise Unencodable("too deep")
    if type(value) in _SCALARS:
        return value
    if type(value) is float:
        return value if math.isfinite(value) else {"t": "float", "v": repr(value)}
    if type(value) is list:
        return [encode(v, depth + 1) for v in value]
    if type(value) in (tuple, set, frozenset):
        items = [encode(v, depth + 1) for v in value]
        if type(value) is not tuple:
            items.sort(key=lambda item: json.dumps(item, sort_keys=True))
        return {"t": type(value).__name__, "v": items}
    if type(value) is dict:
        return {"t": "dict", "v": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if type(value) is bytes:
        return {"t": "bytes", "v": value.decode("latin-1")}
    return _ref(value)


def _ref(value: Any) -> dict[str, str]:
    """A module-level function or class as its import name, if importing that name gives this very object."""
    module, name = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not callable(value) or not isinstance(module, str) or not isinstance(name, str) or "<" in name:
        raise Unencodable(f"no faithful form for a {type(value).__qualname__}")
    found: Any = sys.modules.get(module)
    for part in name.split("."):
        found = getattr(found, part, None)
    if found is not value:
        raise Unencodable(f"{module}.{name} does not import as itself")
    return {"t": "ref", "m": module, "q": name}


def decode(value: Any) -> Any:
    """The value `encode` gave; a ref is imported."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    tag, inner = value.get("t"), value.get("v")
    if tag == "float":
        return float(inner)  # type: ignore[arg-type]
    if tag == "bytes":
        return str(inner).encode("latin-1")
    if tag == "dict":
        return {decode(k): decode(v) for k, v in inner}  # type: ignore[union-attr]
    if tag in ("tuple", "set", "frozenset"):
        return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](decode(v) for v in inner)  # type: ignore[union-attr]
    if tag == "ref":
        found: Any = importlib.import_module(str(value["m"]))
        for part in str(value["q"]).split("."):
            found = getattr(found, part)
        return found
    raise ValueError(f"unknown tag {tag!r} in {value!r}")


def canonical(value: Any, depth: int = 0) -> Any:
    """What an outcome is compared by: `encode` where it can, else the value's type and contents (never raises
    for the value's sake; an object is read through its type's slots and `__dict__`, never its own methods)."""
    if depth > MAX_DEPTH:
        return {"t": "deep"}
    try:
        if type(value) in _SCALARS or type(value) in (float, bytes):
            return encode(value)
        if type(value) in (list, tuple):
            items = [canonical(v, depth + 1) for v in value[:MAX_ITEMS]]
            return items if type(value) is list else {"t": "tuple", "v": items}
        if type(value) in (set, frozenset):
            items = sorted((canonical(v, depth + 1) for v in value), key=lambda i: json.dumps(i, sort_keys=True))
            return {"t": type(value).__name__, "v": items[:MAX_ITEMS]}
        if type(value) is dict:
            return {"t": "dict", "v": [[canonical(k, depth + 1), canonical(v, depth + 1)] for k, v in value.items()]}
        if callable(value) and not hasattr(value, "__next__"):
            return _ref(value)
    except Unencodable:
        pass
    return _object(value, depth)


def _object(value: Any, depth: int) -> Any:
    kind = type(value)
    if hasattr(kind, "__next__") and hasattr(kind, "__iter__"):  # an iterator: its first items, consumed
        items = []
        for item in value:
            items.append(canonical(item, depth + 1))
            if len(items) >= MAX_ITEMS:
                break
        return {"t": "iter", "v": items}
    names = [n for k in kind.__mro__ for n in getattr(k, "__slots__", ()) if isinstance(n, str)]
    fields = {n: _field(value, n) for n in names if _field(value, n) is not _ABSENT}
    attributes = _field(value, "__dict__")
    if isinstance(attributes, dict):
        fields |= attributes
    state = [[k, canonical(v, depth + 1)] for k, v in sorted(fields.items()) if k != "__weakref__"]
    builtin: Any = next((b for b in _BUILTINS if isinstance(value, b)), None)
    if builtin is not None:  # a str, tuple or dict subclass (a namedtuple, an OrderedDict): its contents too
        state.append(["<contents>", canonical(builtin(value), depth + 1)])
    return {"t": "obj", "c": qualified(kind), "v": state}


def _field(value: Any, name: str) -> Any:
    """An attribute as the object stores it (its type's `__getattribute__`, never a method of the project's)."""
    try:
        return object.__getattribute__(value, name)
    except AttributeError:
        return _ABSENT


def _on_cpu_limit(signum: int, frame: Any) -> None:
    raise CallTimeout


def outcome(function: Any, args: list[Any], kwargs: dict[str, Any], cpu_s: float) -> dict[str, Any]:
    """One call's outcome: {"out", "args"} or {"raises": type} or {"timeout": true}, with the CPU it used."""
    random.seed(0)
    started = resource.getrusage(resource.RUSAGE_SELF)
    signal.setitimer(signal.ITIMER_PROF, cpu_s)
    try:
        try:
            returned = function(*args, **kwargs)
            result: dict[str, Any] = {"out": canonical(returned), "args": canonical([args, kwargs])}
        except CallTimeout:
            raise
        except Exception as exc:  # an outcome like any other: compared by type
            result = {"raises": qualified(type(exc))}
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
    except CallTimeout:
        result = {"timeout": True}
    ended = resource.getrusage(resource.RUSAGE_SELF)
    result["cpu"] = round(ended.ru_utime + ended.ru_stime - started.ru_utime - started.ru_stime, 3)
    return result


def resolve(module: str, qualname: str) -> Any:
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def run(calls: list[dict[str, Any]], cpu_s: float) -> list[dict[str, Any]]:
    results = []
    for call in calls:
        try:
            function = resolve(call["module"], call["function"])
            args, kwargs = decode(call["args"]), decode(call["kwargs"])
        except Exception as exc:  # the tree lacks the function, or an argument's reference
            results.append({"raises": qualified(type(exc)), "cpu": 0.0})
            continue
        results.append(outcome(function, args, kwargs, cpu_s))
    return results


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: reference_runner.py ROOT[:ROOT...] INPUTS.json", file=sys.stderr)
        return 4
    roots, inputs_path = sys.argv[1].split(":"), sys.argv[2]
    with open(inputs_path) as f:
        inputs = json.load(f)
    del sys.argv[1:]
    results_fd = os.dup(1)
    os.dup2(2, 1)  # what the project prints goes to stderr, never among the results
    signal.signal(signal.SIGPROF, _on_cpu_limit)
    sys.path.extend(root for root in roots if root and root not in sys.path)  # after the standard library
    results = run(inputs["calls"], float(inputs["cpu_s"]))
    os.write(results_fd, ("\n" + json.dumps(results) + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
