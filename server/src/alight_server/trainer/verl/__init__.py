"""The verl backend (`trainer.backend: verl`): alight's samples and algorithm run by verl's trainer on Ray.

`data.py` lays a `SampleBatch` out as verl's `DataProto`, `registry.py` puts alight's advantage
estimator and loss into verl's registries (`plugin.py` is what verl's workers import to get them),
`config.py` translates alight's config into verl's, `replicas.py` puts verl's rollout replicas behind
the gateway, and `backend.py` is the `TrainerBackend`. Nothing here imports verl at import time:
`pip install 'alight-server[verl]'` is needed only when a function runs.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

INSTALL_HINT = "pip install 'alight-server[verl]'  (install torch first on a CPU machine: pip install torch==2.13.0)"


def require_verl() -> ModuleType:
    """verl itself, or an error with the command that installs it."""
    try:
        import verl  # pyright: ignore[reportMissingImports]  (its own venv, .venv-verl)
    except ImportError as exc:
        raise RuntimeError(f"the verl backend needs verl: {INSTALL_HINT}") from exc
    return verl


def make_backend(config: Any, client: Any = None) -> Any:
    """The `VerlBackend` for `trainer.backend: verl` (trainer/backend.py), its replicas registered with `client`'s
    server (the run's `ReplicaStack`)."""
    require_verl()
    from alight_server.trainer.verl.backend import VerlBackend

    return VerlBackend(config, config.verl, client)
