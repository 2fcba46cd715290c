"""Environments nobody here wrote, reached by the core through entry points only (docs/environments.md)."""
