"""Budgets per attempt and rate limits per run and upstream, enforced at admission in the providers' error shapes."""
