"""The grading interpreter's own module names: what no workspace file may be importable as."""

from __future__ import annotations

import functools
import json
import subprocess

# Names the grader loads or Python's start-up looks for, whether or not the interpreter has them today.
RUNNER_MODULES = frozenset(
    {"pytest_outcomes", "pytest_runner", "alight_pytest_outcomes", "sitecustomize", "usercustomize"}
)

# Run by the interpreter itself, isolated as the grader runs it: the standard library's names, the built-in
# modules, and every top-level module, extension or package folder on its own sys.path (site-packages:
# pytest, _pytest, pluggy, iniconfig, ... and whatever else that environment holds).
_LIST_MODULES = r"""
import importlib.machinery, json, os, sys
suffixes = sorted(importlib.machinery.all_suffixes(), key=len, reverse=True)
names = set(sys.stdlib_module_names) | set(sys.builtin_module_names)
for folder in sys.path:
    if not folder or not os.path.isdir(folder):
        continue
    for entry in os.listdir(folder):
        if os.path.isdir(os.path.join(folder, entry)):
            if entry.isidentifier():
                names.add(entry)
            continue
        for suffix in suffixes:
            if entry.endswith(suffix) and entry[: -len(suffix)].isidentifier():
                names.add(entry[: -len(suffix)])
                break
print(json.dumps(sorted(names)))
"""


@functools.cache
def interpreter_modules(python: str) -> frozenset[str]:
    """Top-level names `python` imports from its own paths, plus RUNNER_MODULES; asked once per interpreter."""
    done = subprocess.run(
        [python, "-s", "-P", "-c", _LIST_MODULES], capture_output=True, text=True, timeout=60, env={}, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"could not list the modules of {python} (exit {done.returncode}): {done.stderr[-500:]}")
    return frozenset(json.loads(done.stdout)) | RUNNER_MODULES


def module_path(rel: str) -> list[str] | None:
    """A workspace file's dotted parts if Python can import it (`pkg/mod.py` -> [pkg, mod], `pkg/__init__.py`
    -> [pkg]), counting sources, sourceless .pyc files and extension modules; None for other files."""
    *folders, name = rel.split("/")
    stem = _module_stem(name)
    if stem is None:
        return None
    return folders if stem == "__init__" else [*folders, stem]


def _module_stem(name: str) -> str | None:
    for suffix in (".py", ".pyc", ".so", ".pyd"):
        if name.endswith(suffix):
            # An extension's tag sits between the name and the suffix (json.cpython-311-x86_64-linux-gnu.so).
            stem = name[: -len(suffix)].split(".")[0]
            return stem if stem.isidentifier() else None
    return None
