"""Subcommands of the `alight` command, one module each."""
