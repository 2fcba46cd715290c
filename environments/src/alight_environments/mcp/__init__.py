"""Interactive environments served as MCP tools per attempt, their score the reward (docs/environments.md)."""
