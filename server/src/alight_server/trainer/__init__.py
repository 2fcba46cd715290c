"""TODO trainer."""
