"""A training run's configuration: `TrainConfig` (run.py), its sections (sections.py) and several policies (policies.py)."""
