"""The options several `alight` commands share are one declaration each (commands/options.py): same flag, same help."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import typer
from typer.core import TyperOption

from alight.cli import app

# Flags that mean the same thing wherever they appear. Not here: `--config` (the server's settings or a training
# config, told apart by ALIGHT_CONFIG), `--server` (`alight train --server` has no env var on purpose) and
# `--logs-dir` (the controller's own folder, or the folders a data command also works on).
SHARED = ("--admin-key", "--db", "--run-dir", "--log-level", "--json", "--set", "--model")
# Same flag, another meaning: the coding kit's `--set` (alight-sandbox, on the SDK alone) overrides a key of its
# --probe config; `alight run --model` names the model its --upstream serves, and its `--json` prints a trajectory.
ELSEWHERE = {("alight data clean", "--set"), ("alight run", "--model"), ("alight run", "--json")}


def _options(command: Any, path: str = "alight") -> Iterator[tuple[str, TyperOption]]:
    """Every option of `command` and of its subcommands, with the command line that takes it."""
    for param in command.params:
        if isinstance(param, TyperOption):
            yield path, param
    for name, sub in getattr(command, "commands", {}).items():
        yield from _options(sub, f"{path} {name}")


def test_each_shared_option_has_one_help_and_env_var_in_every_command() -> None:
    declared: dict[str, dict[tuple[str | None, object], list[str]]] = defaultdict(lambda: defaultdict(list))
    for where, option in _options(typer.main.get_command(app)):
        for flag in SHARED:
            if flag in option.opts and (where, flag) not in ELSEWHERE:
                declared[flag][(option.help, option.envvar)].append(where)
    assert set(declared) == set(SHARED)
    differing = {flag: dict(forms) for flag, forms in declared.items() if len(forms) > 1}
    assert not differing, differing


def test_the_server_settings_and_a_training_config_are_each_one_config_option() -> None:
    forms = {(o.help, o.envvar) for _, o in _options(typer.main.get_command(app)) if "--config" in o.opts}
    assert len(forms) == 2, forms
