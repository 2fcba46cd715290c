"""The server's subcommands of `alight`, registered through the `alight.commands` entry point."""
