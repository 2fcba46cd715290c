"""Server configuration: one pydantic model, filled from flags, ALIGHT_* env vars or YAML."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from alight_server.policies.routing import GatewayRouting
from alight_server.redaction.config import RedactionConfig
from alight_server.store.keys.kek import KekError, KekSource
from alight_server.store.keys.upstream import KeySources

# A viewer or reviewer key is a bearer secret like the admin key: long enough not to be guessed.
MIN_VIEWER_KEY_CHARS = 16
# The keys people hold (docs/api.md "Viewer and reviewer keys"): a viewer reads redacted copies; a reviewer reads
# them too and decides the review queue. Each is configured as `<role>_keys`, `<role>_key_file` or ALIGHT_<ROLE>_KEYS.
PersonRole = Literal["viewer", "reviewer"]


def _check_person_key(key: str, role: PersonRole, admin_key: str | None, where: str) -> None:
    if len(key) < MIN_VIEWER_KEY_CHARS:
        raise ValueError(f"a {role} key in {where} is {len(key)} characters; use at least {MIN_VIEWER_KEY_CHARS}")
    if key.startswith("alt1."):
        raise ValueError(f"a {role} key in {where} starts with alt1., the attempt tokens' prefix; pick another")
    if admin_key is not None and key == admin_key:
        raise ValueError(f"a {role} key in {where} is the admin key; a {role} key must differ from it")


def read_key_file(path: Path | None, role: PersonRole, admin_key: str | None) -> list[str]:
    """The keys of a viewer or reviewer key file (none without one), one a line; blank lines and # comments
    skipped. ValueError names the file."""
    if path is None:
        return []
    try:
        lines = path.expanduser().read_text().splitlines()
    except OSError as exc:
        raise ValueError(f"cannot read {role}_key_file {path}: {exc.strerror or exc}") from exc
    keys = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    for key in keys:
        _check_person_key(key, role, admin_key, f"{role}_key_file {path}")
    return keys


def _distinct_roles(viewer_keys: Iterable[str], reviewer_keys: Iterable[str]) -> None:
    """A key is one role's: a reviewer key that is also a viewer key would read as either."""
    if set(viewer_keys) & set(reviewer_keys):
        raise ValueError("a reviewer key is also a viewer key; a reviewer key must differ from every viewer key")


class AttemptBudget(BaseModel):
    """What one attempt may spend (unset: no limit); past it, its calls are refused and it ends `budget_exceeded`."""

    model_config = ConfigDict(extra="forbid")

    calls: int | None = Field(default=None, ge=1, description="model calls")
    tokens: int | None = Field(default=None, ge=1, description="prompt + completion tokens, summed over its calls")
    completion_tokens: int | None = Field(default=None, ge=1)
    wall_s: float | None = Field(default=None, gt=0, description="seconds since the attempt started")


class RateLimit(BaseModel):
    """A token bucket per minute: full at the start, refilled continuously, a minute's worth at most."""

    model_config = ConfigDict(extra="forbid")

    requests_per_minute: float | None = Field(default=None, ge=1)
    tokens_per_minute: float | None = Field(default=None, ge=1, description="prompt + completion tokens")


class GatewayLimits(BaseModel):
    """Budgets and rate limits the agents feel (docs/gateway.md "Budgets and rate limits"); none by default."""

    model_config = ConfigDict(extra="forbid")

    attempt: AttemptBudget = Field(default_factory=AttemptBudget)
    # Per run: the calls of rollouts sharing a `run_dir` (what alight train sets); rollouts without one share one.
    run: RateLimit = Field(default_factory=RateLimit)
    # Per upstream id; "*" for every upstream not named.
    upstreams: dict[str, RateLimit] = Field(default_factory=dict[str, RateLimit])


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
    # Several policies (routing.py): each call routed to one, recorded with it and sent as its model name.
    # Unset (one policy): calls go upstream as today.
    routing: GatewayRouting | None = None
    limits: GatewayLimits = Field(default_factory=GatewayLimits)


class RetentionConfig(BaseModel):
    """How long captured data is kept (alight_server/store/purge.py purges on a period). Off when absent: kept forever."""

    model_config = ConfigDict(extra="forbid")

    # A rollout's content (the rollout, its calls, spans, events, rewards, attempts, attempt logs) is purged
    # this many days after the rollout ended; never one a running training still needs (store/retention.py).
    content_days: float | None = Field(default=None, gt=0)
    # Training runs' step metrics (the dashboard's curves) are deleted this many days after they were reported.
    step_metrics_days: float | None = Field(default=None, gt=0)
    # How often the server looks for what to purge.
    interval_s: float = Field(default=3600.0, gt=0)

    def enabled(self) -> bool:
        return self.content_days is not None or self.step_metrics_days is not None


class ServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8700, ge=0, le=65535)
    db_url: str = "sqlite:///.alight/alight.db"
    admin_key: str | None = None
    # Keys people read with (docs/api.md "Viewer keys"): GET of rollouts, trajectories, events, rewards, runs and
    # the dashboard, always redacted; never reveal=true, never a write, never the gateway. In the YAML, in
    # ALIGHT_VIEWER_KEYS (comma-separated), or one a line in viewer_key_file (# comments), so none sits in the config.
    viewer_keys: list[str] = Field(default_factory=list)
    viewer_key_file: Path | None = None
    # Keys people review with (docs/api.md "Reviewer keys"): what a viewer key reads, plus deciding the review queue
    # (accept or reject a flagged rollout); nothing else. reviewer_keys, ALIGHT_REVIEWER_KEYS or reviewer_key_file.
    reviewer_keys: list[str] = Field(default_factory=list)
    reviewer_key_file: Path | None = None
    # Secret that signs attempt tokens; derived from admin_key when unset.
    token_secret: str | None = None
    token_ttl_s: float = Field(default=24 * 3600, gt=0)
    # Base URL agents use to reach this server (what the controller hands out).
    public_url: str | None = None
    max_body_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    log_level: str = "info"
    # "module:function" / "path.py:function", or a check command's argv, run when an attempt
    # ends as the agent's own outcome (alight_server/evaluation/evaluators.py).
    evaluator: str | list[str] | dict[str, str] | None = None  # or {source: NAME} (evaluation/sources.py)
    # An interactive environment served as MCP tools per attempt, its score the reward (docs/environments.md):
    # {mcp: NAME, ...its options}, NAME an `alight.environments` entry point (evaluation/evaluators.py).
    environment: dict[str, Any] | None = None
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    # Where an upstream registered with api_key_env / api_key_file may take its key from (store/keys/upstream.py):
    # variables whose names match one of these fnmatch patterns (never ALIGHT_*), files under this folder.
    # Neither by default: the admin key chooses only among what the operator allowed here.
    upstream_key_env: list[str] = Field(default_factory=list)
    upstream_key_dir: Path | None = None
    # Off unless given: nothing is ever deleted (docs/data.md, "Retention and purge").
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    # What the copies people read hide (redaction/, docs/data.md "Redaction"); training data is never changed.
    redaction: RedactionConfig = Field(default_factory=RedactionConfig)
    # The key-encryption key that wraps the store's data keys (store/keys/kek.py, docs/data.md "Keys and rotation"):
    # `secret` (ALIGHT_SECRET_KEY, else derived from admin_key), `file: PATH` or `command: "CMD"` (a key
    # manager's CLI printing the key); a string `file:PATH` / `command:CMD` too (env ALIGHT_DATA_KEY).
    data_key: str = "secret"

    @field_validator("data_key", mode="before")
    @classmethod
    def _data_key_form(cls, value: Any) -> Any:
        """`{file: PATH}` or `{command: CMD}` as YAML gives it, to the one-string form; the form is checked."""
        if isinstance(value, dict):
            if len(value) != 1 or next(iter(value)) not in ("file", "command"):
                raise ValueError("data_key must be `secret`, `file: PATH` or `command: CMD`")
            ((kind, spec),) = value.items()
            value = f"{kind}:{spec}"
        if isinstance(value, str):
            try:
                KekSource.parse(value)
            except KekError as exc:
                raise ValueError(str(exc)) from exc
        return value

    @field_validator("viewer_keys", "reviewer_keys", "upstream_key_env", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        """ALIGHT_VIEWER_KEYS="k1,k2" (or ALIGHT_REVIEWER_KEYS, ALIGHT_UPSTREAM_KEY_ENV="VLLM_*,KEY") arrives as one string."""
        return [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _person_keys_checked(self) -> ServerConfig:
        for key in self.viewer_keys:
            _check_person_key(key, "viewer", self.admin_key, "viewer_keys")
        for key in self.reviewer_keys:
            _check_person_key(key, "reviewer", self.admin_key, "reviewer_keys")
        _distinct_roles(self.viewer_keys, self.reviewer_keys)
        return self

    def all_viewer_keys(self) -> tuple[str, ...]:
        """viewer_keys and the lines of viewer_key_file (read when called: the app reads it once, at start)."""
        return (*self.viewer_keys, *read_key_file(self.viewer_key_file, "viewer", self.admin_key))

    def all_reviewer_keys(self) -> tuple[str, ...]:
        """reviewer_keys and the lines of reviewer_key_file, none of them a viewer key (read when called)."""
        keys = (*self.reviewer_keys, *read_key_file(self.reviewer_key_file, "reviewer", self.admin_key))
        _distinct_roles(self.all_viewer_keys(), keys)
        return keys

    def kek_source(self) -> KekSource:
        return KekSource.parse(self.data_key, admin_key=self.admin_key)

    def key_sources(self) -> KeySources:
        folder = self.upstream_key_dir.expanduser().resolve() if self.upstream_key_dir else None
        return KeySources(tuple(self.upstream_key_env), folder)

    def base_url(self) -> str:
        return (self.public_url or f"http://{self.host}:{self.port}").rstrip("/")
