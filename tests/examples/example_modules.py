"""Import an example's module by path, under a name of its own (several examples have an `agent.py`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(example: str, name: str) -> ModuleType:
    """examples/<example>/<name>.py as the module `examples.<example>.<name>` (once per process)."""
    qualified = f"examples.{example}.{name}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, EXAMPLES / example / f"{name}.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"no module {name}.py in examples/{example}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module  # before running it: dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
