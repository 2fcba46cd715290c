"""HTTP API routers under /api, plus health probes."""
