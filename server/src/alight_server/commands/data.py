"""`alight data`: the store's data commands (purge, keys, export, import), and those other packages add (clean)."""

from __future__ import annotations

from importlib.metadata import entry_points

import typer

from alight.commands.exits import exit_with
from alight_server.commands import data_encrypt, data_export, data_import, data_keys, data_purge

DATA_COMMANDS = "alight.data_commands"  # the entry point group: name = "package.module:register"
CLEAN_HINT = "alight data clean filters coding tasks and comes with the coding kit: pip install alight-sandbox"


def _clean_missing() -> None:
    """Filter coding tasks before training (needs alight-sandbox)."""
    raise exit_with(CLEAN_HINT, 2)


def build_data_app() -> typer.Typer:
    """`alight data` with the server's commands and every installed package's (`alight.data_commands`)."""
    data_app = typer.Typer(help="The store's data, and task sets for training.", no_args_is_help=True)
    data_app.command("purge")(data_purge.purge)
    data_app.command("rotate-key")(data_keys.rotate_key)
    data_app.command("encrypt")(data_encrypt.encrypt)
    data_app.command("export")(data_export.export)
    data_app.command("import")(data_import.import_traces)
    data_app.command("check")(data_import.check)
    plugins = {ep.name: ep for ep in entry_points(group=DATA_COMMANDS)}
    for ep in plugins.values():
        ep.load()(data_app)
    if "clean" not in plugins:
        lenient = {"allow_extra_args": True, "ignore_unknown_options": True}
        data_app.command("clean", context_settings=lenient)(_clean_missing)
    return data_app


def register(app: typer.Typer) -> None:
    app.add_typer(build_data_app(), name="data")
