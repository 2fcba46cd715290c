"""The coding kit agents do not import: the sandbox, the reward gates, the CLI harnesses, assertion quoting and task cleaning."""
