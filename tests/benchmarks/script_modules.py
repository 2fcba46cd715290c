"""The benchmarks' record writer and the docs generator, loaded from their files (they are scripts, not packages)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load_script(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


doc = load_script(REPO / "scripts" / "benchmarks_doc.py")
recorder = load_script(REPO / "benchmarks" / "record.py")
