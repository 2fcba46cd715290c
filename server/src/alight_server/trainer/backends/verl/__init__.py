"""The verl backend (`trainer.backend: verl`): alight's samples and algorithm run by verl's trainer on Ray.

`data.py` lays a `SampleBatch` out as verl's `DataProto`, `registry.py` puts alight's advantage
estimator and loss into verl's registries (`plugin.py` is what verl's workers import to get them),
`config.py` translates alight's config into verl's, `replicas.py` puts verl's rollout replicas behind
the gateway, and `backend.py` is the `TrainerBackend`. Nothing here imports verl at import time: `install.py`
imports it when a function runs, so `pip install 'alight-server[verl]'` is needed only then.
"""

from __future__ import annotations

from typing import Any

from alight_server.trainer.backends.verl.install import require_verl


def make_backend(config: Any, client: Any = None) -> Any:
    """The `VerlBackend` for `trainer.backend: verl` (trainer/backends/base.py), its replicas registered with `client`'s
    server (the run's `ReplicaStack`)."""
    require_verl()
    from alight_server.trainer.backends.verl.backend import VerlBackend

    return VerlBackend(config, config.verl, client)
