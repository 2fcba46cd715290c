"""TODO"""

from __future__ import annotations

from alight_server.gateway.passthrough import ChatFlavour as ResponsesFlavour  # noqa: F401
