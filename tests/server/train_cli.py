"""`alight train --quiet` run in the test's process on a one-task config, as a user would type it."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from alight.cli import app as cli

BASE_CONFIG = "model: tiny\ndataset: {train: t.jsonl}\nagent: {entrypoint: a.py:main}\n"


def alight_train(folder: Path, settings: str) -> Any:
    """The CLI's result for the base config plus `settings` (YAML lines) in `folder`."""
    config = folder / "config.yaml"
    config.write_text(BASE_CONFIG + settings)
    (folder / "t.jsonl").write_text('{"word": "apple"}\n')
    handler = signal.getsignal(signal.SIGTERM)
    try:
        return CliRunner().invoke(cli, ["train", str(config), "--quiet"])
    finally:
        signal.signal(signal.SIGTERM, handler)  # `alight train` installs its own
