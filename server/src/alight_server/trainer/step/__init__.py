"""One training step: the trajectory filters, samples, supervised or RL selection, and the algorithm's loss."""
