"""Differential grading: the graded tree's functions against the original's, on inputs no test contains.

A generated task records the calls its failing tests make into the library and the calls of the function its
bug was planted in (`task["reference"]`, examples/coding/recording.py). After the tests pass, this check:

1. draws new inputs of the same shapes from those calls (seeded by the task: each argument mutated the way its
   type allows, or swapped for another recorded value of its type), leaving out every recorded input;
2. runs them through the original tree and the graded tree, each in its own sandbox with no test file and no
   test loaded (reference_runner.py: one process per tree, a CPU limit per call);
3. compares the two sides' serialized outcomes here, outside both: return value, arguments afterwards, or the
   exception's type. An input the original runs out of CPU on is dropped (every input, when the original's
   side gives no outcomes at all); the graded side running out of CPU where the original answered quickly,
   or giving no outcomes, is a mismatch.

Special-casing the tests' inputs, an object equal to everything, and an answer read off a test file or a
calling frame all give a different outcome on an input no test has: `reference_mismatch`, reward 0.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from alight_sandbox.guards.episode import IGNORED
from alight_sandbox.guards.policy import REPORT_DIR, WORKSPACE, SandboxPolicy
from alight_sandbox.guards.rules import REFERENCE_MISMATCH, Violation, is_test_path
from alight_sandbox.guards.run import run_command

RUNNER = Path(__file__).with_name("reference_runner.py")
MAX_TEXT = 200  # characters of a drawn string
MAX_ITEMS = 50  # items of a drawn list, tuple, set or dict
_ENV = {"PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}


@dataclass
class Reference:
    original: Path  # the project as it was before the bug was planted
    calls: list[list[Any]]  # [module, qualname, args, kwargs] as recorded (task["reference"]["calls"])
    pythonpath: Sequence[str] = (".",)
    seed: str = ""  # the task's id: every grading of a task draws the same inputs
    inputs: int = 40  # drawn inputs at most, spread over the recorded functions
    cpu_s: float = 1.0  # CPU seconds per call on each side


def _pool(value: Any, pool: dict[str, list[Any]]) -> None:
    """Every recorded value by kind, nested ones too: what a mutation may swap a value for."""
    pool.setdefault(_kind(value), []).append(value)
    items = value if isinstance(value, list) else value.get("v") if isinstance(value, dict) else None
    if isinstance(items, list):
        for item in items:
            _pool(item, pool)


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("t"))
    return "int" if type(value) is int else type(value).__name__


def _text(text: str, rng: random.Random, pool: dict[str, list[Any]]) -> str:
    alphabet = "".join(sorted({c for s in pool.get("str", []) for c in s})) or "ab_ -0"
    i = rng.randrange(len(text) + 1)
    choice = rng.randrange(6)
    if choice == 0 and text:
        return text[:i] + text[i + 1 :]  # a character dropped
    if choice == 1:
        return (text[:i] + rng.choice(alphabet) + text[i:])[:MAX_TEXT]  # one of the recorded characters added
    if choice == 2 and text:
        return text[:i] + text[i:].swapcase()
    if choice == 3:
        return (text + rng.choice(pool.get("str") or [text]))[:MAX_TEXT]
    if choice == 4 and text:
        j = rng.randrange(len(text))
        return text[:j] + rng.choice(alphabet) + text[j + 1 :]
    return (text[:i] * 2 + text[i:])[:MAX_TEXT]


def _items(items: list[Any], rng: random.Random, pool: dict[str, list[Any]]) -> list[Any]:
    items = list(items)
    choice = rng.randrange(4)
    if choice == 0 and items:
        i = rng.randrange(len(items))
        items[i] = mutate(items[i], rng, pool)
    elif choice == 1 and items:
        del items[rng.randrange(len(items))]
    elif choice == 2 and items and len(items) < MAX_ITEMS:
        items.insert(rng.randrange(len(items) + 1), mutate(rng.choice(items), rng, pool))
    else:
        items.reverse()
    return items


def mutate(value: Any, rng: random.Random, pool: dict[str, list[Any]]) -> Any:
    """A value of the same kind as `value` (an encoded one: reference_runner's codec), usually a different one."""
    same_kind = pool.get(_kind(value), [])
    if same_kind and rng.random() < 0.25:
        return rng.choice(same_kind)  # another value the tests passed in some call
    if type(value) is bool:
        return not value
    if type(value) is int:
        return rng.choice([value + 1, value - 1, value + rng.randint(2, 9), -value, 0, value * 2])
    if type(value) is float:
        return rng.choice([value + 1.0, value * 2, value / 2, -value, 0.0])
    if isinstance(value, str):
        return _text(value, rng, pool)
    if isinstance(value, list):
        return _items(value, rng, pool)
    if isinstance(value, dict) and value.get("t") in ("tuple", "set", "frozenset", "dict"):
        return {"t": value["t"], "v": _items(value["v"], rng, pool)}
    if isinstance(value, dict) and value.get("t") == "bytes":
        return {"t": "bytes", "v": "".join(c for c in _text(value["v"], rng, pool) if ord(c) < 256)}
    return value  # None, a reference: kept (swapped only for another recorded one, above)


def draw(reference: Reference) -> list[dict[str, Any]]:
    """Up to `reference.inputs` new calls, in turn over the recorded functions; none equals a recorded call."""
    rng = random.Random(f"alight-reference/{reference.seed}")
    pool: dict[str, list[Any]] = {}
    by_function: dict[tuple[str, str], list[list[Any]]] = {}
    for module, function, args, kwargs in reference.calls:
        by_function.setdefault((module, function), []).append([args, kwargs])
        for value in [*args, *(v for _, v in kwargs["v"])]:
            _pool(value, pool)
    seen = {json.dumps(call, sort_keys=True) for call in reference.calls}
    drawn: list[dict[str, Any]] = []
    for _ in range(20 * reference.inputs):
        if len(drawn) >= reference.inputs or not by_function:
            break
        module, function = list(by_function)[len(drawn) % len(by_function)]
        args, kwargs = rng.choice(by_function[(module, function)])
        args = _items_mutated(args, rng, pool)
        if rng.random() < 0.3 and kwargs["v"]:
            kwargs = {"t": "dict", "v": [[k, mutate(v, rng, pool)] for k, v in kwargs["v"]]}
        text = json.dumps([module, function, args, kwargs], sort_keys=True)
        if text not in seen:
            seen.add(text)
            drawn.append({"module": module, "function": function, "args": args, "kwargs": kwargs})
    return drawn


def _items_mutated(args: list[Any], rng: random.Random, pool: dict[str, list[Any]]) -> list[Any]:
    """The positional arguments with one or two of them mutated (never their number: the signature holds)."""
    args = list(args)
    for _ in range(rng.choice([1, 1, 2])):
        if args:
            i = rng.randrange(len(args))
            args[i] = mutate(args[i], rng, pool)
    return args


def _without_tests(source: Path, dest: Path) -> None:
    """A copy of a project tree with no test file, test folder or conftest.py in it."""

    def ignored(folder: str, names: list[str]) -> set[str]:
        rel = os.path.relpath(folder, source)
        tests = {n for n in names if is_test_path(os.path.join(rel, n)) or is_test_path(os.path.join(rel, n, "x"))}
        return set(IGNORED(folder, names)) | tests

    shutil.copytree(source, dest, symlinks=True, ignore=ignored)


def _side(tree: Path, reference: Reference, base: SandboxPolicy, inputs: Path) -> tuple[list[Any] | None, str]:
    """One tree's outcomes for the drawn inputs (None when it gave no well-formed answer), and its output tail."""
    with tempfile.TemporaryDirectory(prefix="alight-reference-") as tmp:
        workspace, scratch = Path(tmp) / "workspace", Path(tmp) / "tmp"
        _without_tests(tree, workspace)
        scratch.mkdir()
        mounts = {f"{REPORT_DIR}/reference_runner.py": str(RUNNER), f"{REPORT_DIR}/reference_inputs.json": str(inputs)}
        policy = replace(
            base, workspace=str(workspace), scratch=str(scratch), read_only_at=mounts, trace_dir=None, env={}
        )
        roots = ":".join([*(f"{WORKSPACE}/{p}".rstrip("/.") for p in reference.pythonpath), WORKSPACE])
        argv = [policy.python, "-s", "-P", f"{REPORT_DIR}/reference_runner.py", roots]
        result = run_command(policy, [*argv, f"{REPORT_DIR}/reference_inputs.json"], env=_ENV, streams="split")
    lines = result.output.strip().splitlines()
    try:
        outcomes = json.loads(lines[-1]) if lines and not result.timed_out else None
    except ValueError:
        outcomes = None
    well_formed = isinstance(outcomes, list) and all(isinstance(o, dict) for o in outcomes)
    return (outcomes if well_formed else None), (result.errors or result.output)[-500:]


def render(value: Any) -> str:
    """An encoded value as Python would write it (for evidence)."""
    if isinstance(value, list):
        return "[" + ", ".join(map(render, value)) + "]"
    if not isinstance(value, dict):
        return repr(value)
    tag, items = value.get("t"), value.get("v")
    items = items if isinstance(items, list) else []
    if tag == "tuple":
        return "(" + ", ".join(map(render, items)) + ("," if len(items) == 1 else "") + ")"
    if tag in ("set", "frozenset", "iter"):
        return f"{tag}([" + ", ".join(map(render, items)) + "])"
    if tag == "dict":
        return "{" + ", ".join(f"{render(k)}: {render(v)}" for k, v in items) + "}"
    if tag == "ref":
        return f"{value['m']}.{value['q']}"
    if tag == "obj":
        return f"<{value['c']} " + ", ".join(f"{k}={render(v)}" for k, v in items) + ">"
    return repr(value.get("v"))


def _said(outcome: dict[str, Any], arguments: bool) -> str:
    """What one side did; with `arguments`, also what it left its arguments as (where the sides differ in that)."""
    if "raises" in outcome:
        return f"raised {outcome['raises']}"
    if outcome.get("timeout"):
        return f"ran out of CPU time ({outcome.get('cpu')} s)"
    left = f" and left its arguments as {render(outcome.get('args'))[:200]}" if arguments else ""
    return f"returned {render(outcome.get('out'))[:300]}{left}"


def _differs(ours: dict[str, Any], theirs: dict[str, Any], cpu_s: float) -> bool | None:
    """True: a mismatch; False: the same; None: the input is dropped (the original could not answer it)."""
    if theirs.get("timeout") or not theirs:
        return None
    if ours.get("timeout"):
        return True if float(theirs.get("cpu", cpu_s)) < cpu_s / 4 else None
    keys = ("out", "args", "raises")
    return {k: ours.get(k) for k in keys} != {k: theirs.get(k) for k in keys}


def reference_violations(reference: Reference, graded: Path, policy: SandboxPolicy) -> list[Violation]:
    """`reference_mismatch` with the first differing input and both outcomes; [] when every input agrees."""
    drawn = draw(reference)
    if not drawn:
        return []
    with tempfile.TemporaryDirectory(prefix="alight-reference-inputs-") as tmp:
        inputs = Path(tmp) / "inputs.json"
        inputs.write_text(json.dumps({"calls": drawn, "cpu_s": reference.cpu_s}))
        os.chmod(tmp, 0o755)  # the sandbox's user is not this process's
        with ThreadPoolExecutor(2) as pool:
            sides = pool.map(lambda tree: _side(tree, reference, policy, inputs), [reference.original, graded])
            (theirs, _), (ours, output) = list(sides)
    if theirs is None or len(theirs) != len(drawn):
        return []  # the original itself gave no answer: nothing to hold the graded tree to
    if ours is None or len(ours) != len(drawn):
        return [Violation(REFERENCE_MISMATCH, f"the graded tree's side gave no outcomes; its output ends: {output}")]
    verdicts = [_differs(o, t, reference.cpu_s) for o, t in zip(ours, theirs, strict=True)]
    differing = [i for i, v in enumerate(verdicts) if v]
    if not differing:
        return []
    call, i = drawn[differing[0]], differing[0]
    arguments = theirs[i].get("args") != ours[i].get("args")
    text = f"{call['module']}.{call['function']}(*{render(call['args'])}, **{render(call['kwargs'])})"
    evidence = (
        f"{len(differing)} of {sum(v is not None for v in verdicts)} drawn inputs differ from the original; "
        f"first {text[:400]}: the original {_said(theirs[i], arguments)}; the graded tree's {_said(ours[i], arguments)}"
    )
    return [Violation(REFERENCE_MISMATCH, evidence)]
