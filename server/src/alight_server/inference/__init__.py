"""TODO inference."""
