"""Evaluation: evaluators that score an attempt from outside the agent, `alight eval` over a policy or over imported traces."""
