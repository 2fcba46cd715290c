"""The verl backend (`trainer.backend: verl`): alight's samples and algorithm run by verl's trainer on Ray.

Nothing here imports verl at import time: install.py imports it when a function runs, so
`pip install 'alight-server[verl]'` is needed only then.
"""

from __future__ import annotations

from typing import Any

from alight_server.trainer.backends.verl.install import require_verl


def make_backend(config: Any, client: Any = None) -> Any:
    """The `VerlBackend`, its replicas registered with `client`'s server (the run's `ReplicaStack`)."""
    require_verl()
    from alight_server.trainer.backends.verl.backend import VerlBackend

    return VerlBackend(config, config.verl, client)
