"""verl itself, imported when a function of the backend runs, or an error with the command that installs it."""

from __future__ import annotations

from types import ModuleType

INSTALL_HINT = "pip install 'alight-server[verl]'  (install torch first on a CPU machine: pip install torch==2.13.0)"


def require_verl() -> ModuleType:
    """verl itself, or an error with the command that installs it."""
    try:
        import verl  # pyright: ignore[reportMissingImports]  (its own venv, .venv-verl)
    except ImportError as exc:
        raise RuntimeError(f"the verl backend needs verl: {INSTALL_HINT}") from exc
    return verl
