"""Pause for weight updates: the in-flight gate, its sync across replicas, and the admin routes."""
