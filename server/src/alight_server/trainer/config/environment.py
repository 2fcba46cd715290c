"""The training config's `environment:` (an environment served as MCP tools, docs/environments.md): its tasks."""

from __future__ import annotations

from typing import Any


def tasks_from_environment(cls: Any, data: Any) -> Any:
    """`environment:` without `dataset:`: the environment's own tasks, its train and validation splits, through
    the task source of the same name (evaluation/sources.py); `train` / `validation` counts, 0 or unset for all."""
    env = data.get("environment") if isinstance(data, dict) else None
    if not isinstance(env, dict) or "dataset" in data:
        return data
    counts = {"train": env.get("train", 0), "validation": env.get("validation", 0)}
    return {**data, "dataset": {"source": env.get("mcp"), "config": env, **counts}}
