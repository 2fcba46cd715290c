# pyright: strict
"""The CLI options the SDK's commands and the server's share, each declared once: `admin_key: AdminKeyOption = None`.

The server's own shared options (`--db`, `--run-dir`, ...) are in alight_server/commands/options.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

_ADMIN_KEY = typer.Option(
    "--admin-key",
    envvar="ALIGHT_ADMIN_KEY",
    help="The alight server's admin key. A store's content keys derive from it when no data_key, ALIGHT_DATA_KEY "
    "or ALIGHT_SECRET_KEY says otherwise; `alight serve` on loopback generates and prints one when none is given.",
)
AdminKeyOption = Annotated[str | None, _ADMIN_KEY]
RequiredAdminKeyOption = Annotated[str, _ADMIN_KEY]

# Where a command works with a server it is told of; `alight run --server` and `alight train --server` (an embedded
# server unless given) have no env var, so a variable left set cannot move them off their own stack.
_SERVER = typer.Option("--server", envvar="ALIGHT_SERVER_URL", help="The alight server's URL.")
ServerOption = Annotated[str | None, _SERVER]
RequiredServerOption = Annotated[str, _SERVER]

# A training config a command reads part of (its help says which); the server's own settings are its `--config`.
TrainingConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="A training config (YAML), the file `alight train` takes. Read from it: the model, and for `alight "
        "run` the inference:, agent: and evaluator: sections (serving that policy), for `alight data check` samples:, "
        "for `alight controller --runner k8s` controller.allow_unpinned_images and controller.images (its flags "
        "override them).",
    ),
]
