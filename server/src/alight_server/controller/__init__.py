"""TODO controller."""
