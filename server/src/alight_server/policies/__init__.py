"""Policies seen from the gateway: which policy serves a call, and a policy's own version among the global ones."""
