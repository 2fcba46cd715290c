"""A rank other than 0 of a data-parallel embedded run: it builds the same backend and runs rank 0's commands.
Started by rank 0 (`python -m alight_server.trainer.backends.follower`, the config in the environment) or torchrun."""

from __future__ import annotations

import json
import os

import torch

from alight_server.trainer.backends.embedded import make_embedded_backend
from alight_server.trainer.backends.rendezvous import CONFIG_ENV
from alight_server.trainer.config.run import TrainConfig


def follow(config: TrainConfig) -> None:
    """Build rank 0's backend here and run its commands until it closes."""
    if config.inference.torch_threads:  # as rank 0 does: ranks share the machine's cores with it
        torch.set_num_threads(config.inference.torch_threads)
    make_embedded_backend(config).follow()


if __name__ == "__main__":
    follow(TrainConfig.model_validate(json.loads(os.environ[CONFIG_ENV])))
