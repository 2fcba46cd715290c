"""Capture: a model call as the row to store, and the writer that commits rows in groups."""
