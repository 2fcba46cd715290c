"""The CLI options several commands share, each declared once: `admin_key: AdminKeyOption = None`.

A repeatable option is None when not given (`logs_dirs or []`): a list default would be one shared list.

The help of each says what is true for every command that takes it. `--admin-key`, `--server` and a training
`--config` are the SDK's (alight/commands/options.py), shared with `alight run` and `alight logs`. An option that
only shares its name with another (`alight train --server`, a server to train against, with no env var) is not one
of these.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from alight.commands.options import AdminKeyOption as AdminKeyOption
from alight.commands.options import RequiredAdminKeyOption as RequiredAdminKeyOption
from alight.commands.options import RequiredServerOption as RequiredServerOption
from alight.commands.options import ServerOption as ServerOption
from alight.commands.options import TrainingConfigOption as TrainingConfigOption

DEFAULT_DB = "sqlite:///.alight/alight.db"

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db", envvar="ALIGHT_DB", help="The store: a SQLAlchemy URL or SQLite file (default .alight/alight.db)."
    ),
]
ServerConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        envvar="ALIGHT_CONFIG",
        help="The server's YAML settings (any ServerConfig field: db_url, admin_key, data_key, redaction, ...); "
        "flags win.",
    ),
]
RunDirOption = Annotated[
    Path | None,
    typer.Option(
        "--run-dir",
        help="A training run's folder (its output_dir): its store, opened with the admin key its stack.json keeps.",
    ),
]
LogsDirsOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--logs-dir",
        help="A controller's logs folder (alight controller --logs-dir) with attempt logs of this store's rollouts, "
        "handled with them. Repeatable; a run folder's own logs/ is always included.",
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option("--model", help="A Hugging Face model whose tokenizer renders and shows text (default: --config's)."),
]
SettingsOption = Annotated[
    list[str] | None, typer.Option("--set", help="Override any config key: --set validation.every=2 (repeatable).")
]
LogLevelOption = Annotated[
    str | None, typer.Option("--log-level", envvar="ALIGHT_LOG_LEVEL", help="debug, info, warning or error.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the report as one JSON object.")]
