"""Trainers: turn trajectories into samples and samples into policy updates."""
