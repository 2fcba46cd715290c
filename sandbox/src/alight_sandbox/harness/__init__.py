# pyright: strict
"""Closed command-line agents (Claude Code, Codex) as rollouts, unmodified: workspace, config, prompt, check.

Each harness is an entrypoint for the controller (`agent: {entrypoint: alight_sandbox.harness.claude_code:episode}`).
Per attempt it makes a fresh workspace from the task, writes the CLI's own configuration (a relay on the
sandbox's loopback as its endpoint, a placeholder key, telemetry and auto-update off), runs the CLI
non-interactively on the task's prompt inside a bubblewrap sandbox whose only way out is a forwarder that
adds the attempt token to this attempt's model calls (alight_sandbox.harness.sandbox), then runs the task's check
command in a sandbox of the same kind: a number on its last output line (clamped to the task's range), or
its exit status, is the rollout's reward. Where the run serves an environment (`environment:`), the CLI also
gets its MCP server through the same forwarder, and the environment's score, posted by the server, outranks
the check's (alight_sandbox.harness.environment).
"""

from alight_sandbox.harness.workspace import CliTask, check_reward, make_workspace

__all__ = ["CliTask", "check_reward", "make_workspace"]
