"""Upstreams (the OpenAI-compatible servers the gateway forwards to) and the policy versions they serve."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, field_validator, model_validator

from alight.schemas.strict import Strict


class UpstreamCreate(Strict):
    id: str | None = Field(default=None, min_length=1, max_length=200)
    url: str = Field(min_length=1, max_length=2000, description="OpenAI-compatible base URL, ending in /v1")
    policy_version: int = Field(default=0, ge=0)
    model: str | None = Field(default=None, description="model name the upstream serves")
    # At most one of the three. No length limit on api_key: a refused value would be echoed in the 422.
    api_key: str | None = Field(
        default=None, min_length=1, description="stored encrypted under the server's ALIGHT_SECRET_KEY, never returned"
    )
    api_key_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        max_length=200,
        description="name of a variable in the server's environment holding the key, read at each use",
    )
    api_key_file: str | None = Field(
        default=None,
        min_length=2,
        max_length=4000,
        description="absolute path of a file holding the key, read at each use",
    )

    @field_validator("url")
    @classmethod
    def _http_url_with_a_host(cls, value: str) -> str:
        """Refused at registration, not at the first model call: a typo would otherwise fail every call."""
        parts = urlsplit(value)
        try:
            port_ok = parts.port is None or 0 < parts.port < 65536
        except ValueError:
            port_ok = False
        if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok or value != value.strip():
            raise ValueError(
                f"an upstream url is an http:// or https:// base URL with a host (and a valid port), like "
                f"http://127.0.0.1:8000/v1; got {value!r}"
            )
        if parts.query or parts.fragment:
            raise ValueError(f"an upstream url has no query or fragment (the gateway appends paths); got {value!r}")
        return value

    @field_validator("api_key_file")
    @classmethod
    def _absolute_path(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError("api_key_file is an absolute path on the server's machine, like /run/secrets/vllm-key")
        return value

    @model_validator(mode="after")
    def _one_key_source(self) -> UpstreamCreate:
        given = [name for name in ("api_key", "api_key_env", "api_key_file") if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of api_key, api_key_env and api_key_file; got {' and '.join(given)}")
        return self


class Upstream(BaseModel):
    id: str
    url: str
    policy_version: int
    model: str | None
    api_key_encrypted: bool = Field(default=False, description="an api_key is stored (encrypted; never returned)")
    api_key_env: str | None = None
    api_key_file: str | None = None
    # The stored Fernet token: the gateway opens it to call the upstream; never serialized into API answers.
    api_key_sealed: str | None = Field(default=None, exclude=True, repr=False)
    created_at: datetime


class PolicyVersion(BaseModel):
    version: int
    created_at: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)
