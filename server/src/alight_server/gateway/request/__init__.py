"""The request path: one agent call from the socket to its reply (dispatch, callers, checks, pipeline, reply)."""
