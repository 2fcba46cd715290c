"""alight: train the agents you already run. Decorate, reward, and the server does the rest."""

from __future__ import annotations

from alight.agent_header import calling_agent
from alight.context import AttemptContext, current, emit, reward
from alight.decorator import rollout
from alight.integrations import instrument_all

__all__ = ["AttemptContext", "calling_agent", "current", "emit", "instrument_all", "reward", "rollout"]
__version__ = "0.1.0"
