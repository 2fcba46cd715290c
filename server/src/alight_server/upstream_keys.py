"""Upstream API keys at rest: sealed with ALIGHT_SECRET_KEY (Fernet), or references read only when used.

An upstream's `api_key` is stored as a Fernet token (AES-128-CBC + HMAC-SHA256, from `cryptography`)
under the key in ALIGHT_SECRET_KEY, never as plain text. `api_key_env` / `api_key_file` store only a
name: the key is read from the server's environment or from the file each time the gateway loads its
upstreams, so rotating the file (or restarting with a new variable) takes effect without re-registering.
ALIGHT_SECRET_KEY may hold several comma-separated keys: the first seals, any of them opens (rotation).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.fernet import MultiFernet

    from alight.schemas import Upstream

SECRET_KEY_ENV = "ALIGHT_SECRET_KEY"
MAKE_KEY = 'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'


class UpstreamKeyError(RuntimeError):
    """An upstream's API key cannot be sealed or read; the message says what to set."""


def _box() -> MultiFernet | None:
    raw = os.environ.get(SECRET_KEY_ENV, "").strip()
    if not raw:
        return None
    try:
        from cryptography.fernet import Fernet, MultiFernet
    except ModuleNotFoundError as exc:  # a dependency of alight-server; missing only in a broken install
        raise UpstreamKeyError("upstream api keys need `cryptography`: pip install 'cryptography>=42'") from exc
    try:
        return MultiFernet([Fernet(part.strip()) for part in raw.split(",") if part.strip()])
    except ValueError as exc:
        raise UpstreamKeyError(
            f"{SECRET_KEY_ENV} must be one or more comma-separated Fernet keys (32 url-safe base64-encoded "
            f"bytes each); make one with: {MAKE_KEY}"
        ) from exc


def has_secret_key() -> bool:
    return _box() is not None


def seal(api_key: str) -> str:
    """The Fernet token to store for `api_key`."""
    box = _box()
    if box is None:
        raise UpstreamKeyError(
            f"an upstream api_key is stored encrypted, and this server has no {SECRET_KEY_ENV}: start it with "
            f"{SECRET_KEY_ENV} set (make a key with: {MAKE_KEY}), or register the upstream with api_key_env "
            "(a variable in the server's environment) or api_key_file (a file the server can read) instead"
        )
    return box.encrypt(api_key.encode()).decode()


def unseal(upstream_id: str, token: str) -> str:
    from cryptography.fernet import InvalidToken

    box = _box()
    if box is None:
        raise UpstreamKeyError(
            f"upstream {upstream_id!r} has an encrypted api_key, and this server has no {SECRET_KEY_ENV}: "
            f"set it to the key the upstream was registered under, or register the upstream again"
        )
    try:
        return box.decrypt(token.encode()).decode()
    except InvalidToken:
        raise UpstreamKeyError(
            f"{SECRET_KEY_ENV} does not decrypt the api_key of upstream {upstream_id!r} (was the key changed?): "
            f"set it to the key the upstream was registered under (old and new keys may be listed "
            f"comma-separated, new first), or register the upstream again"
        ) from None


def resolve(upstream: Upstream) -> str | None:
    """The key to send to `upstream` now, or None when it needs none."""
    if upstream.api_key_sealed is not None:
        return unseal(upstream.id, upstream.api_key_sealed)
    if upstream.api_key_env is not None:
        value = os.environ.get(upstream.api_key_env, "").strip()
        if not value:
            raise UpstreamKeyError(
                f"upstream {upstream.id!r} takes its api_key from ${upstream.api_key_env}, which is not set "
                "(or empty) in the server's environment"
            )
        return value
    if upstream.api_key_file is not None:
        try:
            value = Path(upstream.api_key_file).read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise UpstreamKeyError(
                f"upstream {upstream.id!r} takes its api_key from {upstream.api_key_file}, which the server "
                f"cannot read ({type(exc).__name__}: {exc.strerror if isinstance(exc, OSError) else exc})"
            ) from None
        if not value:
            raise UpstreamKeyError(
                f"upstream {upstream.id!r} takes its api_key from {upstream.api_key_file}, which is empty"
            )
        return value
    return None


def check_sealed(upstreams: list[Upstream]) -> None:
    """Fail at start, not at the first model call, when stored keys cannot be opened with this server's key."""
    for upstream in upstreams:
        if upstream.api_key_sealed is not None:
            unseal(upstream.id, upstream.api_key_sealed)
