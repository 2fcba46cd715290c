"""Server configuration: one pydantic model, filled from flags, ALIGHT_* env vars or YAML."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class GatewayConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    train_temperature: float = Field(default=1.0, ge=0)
    val_temperature: float = Field(default=0.0, ge=0)
    # Logprobs the gateway forces; top_logprobs stays whatever the agent asked.
    force_logprobs: bool = True
    # Longer than the OpenAI and Anthropic clients' own 600 s: a slow call is abandoned by its client
    # (which cancels the upstream request, client_gone.py) rather than answered 504 while still generating.
    upstream_timeout_s: float = Field(default=660.0, gt=0)
    # Training-time cap on every call's output tokens (max_tokens / max_completion_tokens / the Responses
    # max_output_tokens / the Messages max_tokens); the call record says when it lowered what the agent asked.
    max_output_tokens: int | None = Field(default=None, ge=1)
    max_retries: int = Field(default=3, ge=0)
    retry_after_s: float = Field(default=1.0, gt=0, description="Retry-After sent while paused")
    # How often a gateway reads the pause it shares with the other gateway processes on its store.
    replica_sync_s: float = Field(default=0.1, gt=0, le=5)


class ServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8700, ge=0, le=65535)
    db_url: str = "sqlite:///.alight/alight.db"
    admin_key: str | None = None
    # Secret that signs attempt tokens; derived from admin_key when unset.
    token_secret: str | None = None
    token_ttl_s: float = Field(default=24 * 3600, gt=0)
    # Base URL agents use to reach this server (what the controller hands out).
    public_url: str | None = None
    max_body_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    log_level: str = "info"
    # "module:function" / "path.py:function", or a check command's argv, run when an attempt
    # ends as the agent's own outcome (alight_server/evaluators.py).
    evaluator: str | list[str] | None = None
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)

    def base_url(self) -> str:
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")
