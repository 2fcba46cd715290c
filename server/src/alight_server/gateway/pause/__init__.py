"""Pause for weight updates: the in-flight gate and its sync across replicas (the admin routes are admin.py)."""
