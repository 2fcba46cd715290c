"""Trajectories: an attempt's model calls joined with its spans and rewards, and a call's answer read from any API flavour."""
