"""Upstream API keys at rest: sealed with ALIGHT_SECRET_KEY (Fernet), or references read only when used.

The three ways a key is stored, and where `api_key_env` / `api_key_file` may point (`KeySources`, checked at
registration and again at each read): docs/api.md "Upstream API keys".
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.fernet import MultiFernet

    from alight.schemas import Upstream, UpstreamCreate

SECRET_KEY_ENV = "ALIGHT_SECRET_KEY"
KEY_ENV_SETTING = "upstream_key_env (env ALIGHT_UPSTREAM_KEY_ENV)"
KEY_DIR_SETTING = "upstream_key_dir (env ALIGHT_UPSTREAM_KEY_DIR)"
MAKE_KEY = 'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'


class UpstreamKeyError(RuntimeError):
    """An upstream's API key cannot be sealed or read; the message says what to set."""


@dataclass(frozen=True)
class KeySources:
    """Where `api_key_env` / `api_key_file` may point: name patterns (fnmatch, case-sensitive) and one folder.

    The default allows neither: an operator opts in, e.g. `upstream_key_env: ["VLLM_*"]`,
    `upstream_key_dir: /run/secrets`.
    """

    env_patterns: tuple[str, ...] = ()
    folder: Path | None = None

    def env_refusal(self, name: str) -> str | None:
        """Why the variable `name` may not hold an upstream key, or None when it may."""
        if name.upper().startswith("ALIGHT_"):
            return (
                f"api_key_env {name!r} names one of alight's own variables (ALIGHT_*), which hold the server's "
                f"secrets and are never sent to an upstream, whatever {KEY_ENV_SETTING} allows: put the key in "
                "another variable"
            )
        if not any(fnmatch.fnmatchcase(name, pattern) for pattern in self.env_patterns):
            allowed = ", ".join(self.env_patterns) if self.env_patterns else "none"
            return (
                f"api_key_env {name!r} is not a variable this server lets upstreams read (its {KEY_ENV_SETTING} "
                f"allows: {allowed}): add a pattern matching it to that setting, or register the key as api_key"
            )
        return None

    def key_file(self, path: str) -> tuple[Path, str | None]:
        """The file `path` with symlinks and `..` resolved, and why it may not hold an upstream key (None when
        it may): the one path both checked and read."""
        real = Path(path).resolve()
        if self.folder is None:
            return real, (
                f"api_key_file {path!r} is refused: this server reads upstream key files only under its "
                f"{KEY_DIR_SETTING}, which is not set: set it to the folder holding your key files, or register "
                "the key as api_key"
            )
        folder = self.folder.resolve()
        if real == folder or not real.is_relative_to(folder):
            return real, (
                f"api_key_file {path!r} (resolved: {real}) is outside {folder}, the only folder this server reads "
                f"upstream key files from ({KEY_DIR_SETTING}): move the file there, or change that setting"
            )
        return real, None

    def check(self, upstream: UpstreamCreate) -> None:
        """Refuse a registration whose key reference points where the server does not allow."""
        refusal = None
        if upstream.api_key_env is not None:
            refusal = self.env_refusal(upstream.api_key_env)
        elif upstream.api_key_file is not None:
            refusal = self.key_file(upstream.api_key_file)[1]
        if refusal is not None:
            raise UpstreamKeyError(refusal)


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


def resolve(upstream: Upstream, sources: KeySources) -> str | None:
    """The key to send to `upstream` now, or None when it needs none; references only where `sources` allow."""
    if upstream.api_key_sealed is not None:
        return unseal(upstream.id, upstream.api_key_sealed)
    if upstream.api_key_env is not None:
        if (refusal := sources.env_refusal(upstream.api_key_env)) is not None:
            raise UpstreamKeyError(f"upstream {upstream.id!r}: {refusal}")
        value = os.environ.get(upstream.api_key_env, "").strip()
        if not value:
            raise UpstreamKeyError(
                f"upstream {upstream.id!r} takes its api_key from ${upstream.api_key_env}, which is not set "
                "(or empty) in the server's environment"
            )
        return value
    if upstream.api_key_file is not None:
        real, refusal = sources.key_file(upstream.api_key_file)
        if refusal is not None:
            raise UpstreamKeyError(f"upstream {upstream.id!r}: {refusal}")
        try:  # the path checked, not resolved again: a file swapped for a symlink since is not followed
            value = _read_no_follow(real)
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


def _read_no_follow(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO reads as empty, not forever
    with os.fdopen(fd, encoding="utf-8") as f:
        return f.read(64 * 1024).strip()


def check_sealed(upstreams: list[Upstream]) -> None:
    """Fail at start, not at the first model call, when stored keys cannot be opened with this server's key."""
    for upstream in upstreams:
        if upstream.api_key_sealed is not None:
            unseal(upstream.id, upstream.api_key_sealed)
