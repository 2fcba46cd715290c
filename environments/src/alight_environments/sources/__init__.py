"""Task sources and scorers from packages, found by the core through the `alight.task_sources` entry points."""
