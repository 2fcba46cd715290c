"""Imported traces: other tools' logs read into offline rollouts, checked as the sample builder would see them."""
