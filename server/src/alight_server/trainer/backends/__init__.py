"""Trainer backends: what runs the RL update (embedded PyTorch, data-parallel ranks, verl) behind one seam (base.py)."""
