"""A training run: the loop over steps, its rollout phases and sources, weight sync, checkpoints and the dataset."""
