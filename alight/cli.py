"""The `alight` command. Each subcommand lives in alight/commands/<name>.py and registers itself.

Server-side commands import alight_server lazily, so an agent image with only
the SDK installed still has a working `alight` that names the missing package.
"""

from __future__ import annotations

import importlib

import typer

COMMANDS = ("serve", "run", "controller", "train", "logs", "eval", "data")

app = typer.Typer(help="alight: train the agents you already run.", no_args_is_help=True, add_completion=False)
for _name in COMMANDS:
    importlib.import_module(f"alight.commands.{_name}").register(app)


def main() -> None:
    app()
