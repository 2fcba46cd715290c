"""The `alight` command: `alight run` and `alight logs` here, the server's commands by entry point.

The SDK never imports the server: alight-server registers its subcommands under the `alight.commands` entry point
group, so an agent image with only the SDK still has a working `alight` that names the missing package.
"""

from __future__ import annotations

from importlib.metadata import entry_points

import typer

from alight.commands import logs, run
from alight.commands.console import utf8_into_pipes

SERVER_COMMANDS = "alight.commands"  # the entry point group: name = "package.module:register"
SERVER_HINT = "serve, controller, train, eval and data come with the server: pip install alight-server"


def build_app() -> typer.Typer:
    """The command with this SDK's subcommands and every installed package's, by name."""
    plugins = sorted(entry_points(group=SERVER_COMMANDS), key=lambda ep: ep.name)
    epilog = None if plugins else SERVER_HINT
    app = typer.Typer(
        help="alight: train the agents you already run.", no_args_is_help=True, add_completion=False, epilog=epilog
    )
    run.register(app)
    logs.register(app)
    for ep in plugins:
        ep.load()(app)
    return app


app = build_app()


def main() -> None:
    utf8_into_pipes()  # a log or pipe gets whole UTF-8 characters, never the locale's lone bytes
    app()
