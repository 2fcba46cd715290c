"""The request path: one agent call from the socket to its reply (dispatch, checks, pipeline, relay, client gone)."""
