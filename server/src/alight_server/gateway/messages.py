"""TODO"""

from __future__ import annotations

from alight_server.gateway.passthrough import ChatFlavour as MessagesFlavour  # noqa: F401
