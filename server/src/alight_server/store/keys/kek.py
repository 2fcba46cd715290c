"""Key-encryption keys (KEKs): where the key that wraps the store's data keys comes from.

A source is the server config's `data_key:` (or ALIGHT_DATA_KEY): `secret` (the default), `file:PATH` or
`command:CMD`; docs/data.md "Keys and rotation" says what each reads. None of these (a library user, a test):
a key of this process only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
import shlex
import subprocess
from functools import cached_property
from pathlib import Path

from alight_server.store.keys.upstream import SECRET_KEY_ENV

KEK_ENV = "ALIGHT_DATA_KEY"
SETTING = f"data_key (server config; env {KEK_ENV})"
FORMS = "`secret`, `file:PATH` or `command:CMD`"
MAKE_KEY = 'python -c "import secrets; print(secrets.token_hex(32))"'
COMMAND_TIMEOUT_S = 30.0
PROCESS_PREFIX = "process-"  # the fingerprint of a key of one process only: never a store's lasting key


# The KEK of a store opened with no source: one per process (a store reopened in it opens what it wrote), made at
# import and never stored, so nothing sealed under it opens once the process has ended.
_PROCESS_KEK = secrets.token_bytes(32)


class KekError(ValueError):
    """A key-encryption key that cannot be read, or a `data_key` setting that is not one; the message names the
    source and what to fix. A ValueError, not a StoreError: store/base.py names KekSource, so this module
    imports nothing of the store's (the server config's validator turns it into its own error)."""


def fingerprint(kek: bytes) -> str:
    """The id a wrapped data key records for the KEK that wrapped it (not the key: a one-way digest)."""
    return hashlib.sha256(b"alight-kek-id\0" + kek).hexdigest()[:16]


def _derived(secret: str) -> bytes:
    return hashlib.sha256(b"alight-data-kek\0" + secret.encode()).digest()


def parse_key(raw: bytes, where: str) -> bytes:
    """32 key bytes from what a file or command gave: raw bytes, 64 hex digits or base64; KekError otherwise."""
    if len(raw) == 32:
        return raw
    text = raw.decode("ascii", errors="replace").strip()
    if len(text) == 64:
        try:
            return bytes.fromhex(text)
        except ValueError:
            pass
    for decode in (base64.urlsafe_b64decode, base64.b64decode):
        try:
            key = decode(text.encode())
        except (binascii.Error, ValueError):
            continue
        if len(key) == 32:
            return key
    raise KekError(
        f"{where} does not hold a 32-byte key ({len(raw)} bytes read): give 32 raw bytes, 64 hex digits or "
        f"base64 of 32 bytes (make one with: {MAKE_KEY})"
    )


class KekSource:
    """One KEK source: `keys()` are its KEKs, the first wraps new data keys and every one unwraps."""

    def __init__(self, kind: str, spec: str = "", *, admin_key: str | None = None) -> None:
        if kind not in ("secret", "file", "command", "process"):
            raise KekError(f"unknown {SETTING} kind {kind!r}: use {FORMS}")
        if kind in ("file", "command") and not spec.strip():
            raise KekError(f"{SETTING} `{kind}:` needs a {'path' if kind == 'file' else 'command'} after the colon")
        self.kind = kind
        self.spec = spec.strip()
        self.admin_key = admin_key

    @classmethod
    def parse(cls, value: str | None, *, admin_key: str | None = None) -> KekSource:
        """A source from its setting: `secret` (or empty), `file:PATH`, `command:CMD`."""
        value = (value or "secret").strip()
        if value == "secret":
            return cls("secret", admin_key=admin_key)
        kind, colon, spec = value.partition(":")
        if not colon or kind.strip() not in ("file", "command"):
            raise KekError(f"{SETTING} is {value!r}: use {FORMS}")
        return cls(kind.strip(), spec, admin_key=admin_key)

    @classmethod
    def default(cls, admin_key: str | None = None) -> KekSource:
        """ALIGHT_DATA_KEY when set, else the server secret when there is one, else a key of this process."""
        if os.environ.get(KEK_ENV, "").strip():
            return cls.parse(os.environ[KEK_ENV], admin_key=admin_key)
        if admin_key or os.environ.get(SECRET_KEY_ENV, "").strip():
            return cls("secret", admin_key=admin_key)
        return cls("process")  # shared by every store this process opens without a source

    def describe(self) -> str:
        if self.kind == "secret":
            return f"the server secret ({SECRET_KEY_ENV}, else derived from the admin key)"
        if self.kind == "process":
            return "a key of this process only (no data_key, ALIGHT_SECRET_KEY or admin key given)"
        return f"{self.kind}:{self.spec}"

    def keys(self) -> list[bytes]:
        """The KEKs (the first wraps); KekError naming the source when none can be read."""
        return list(self._keys)

    def ids(self) -> list[str]:
        prefix = PROCESS_PREFIX if self.kind == "process" else ""
        return [prefix + fingerprint(key) for key in self._keys]

    def same_as(self, other: KekSource) -> bool:
        return self.ids() == other.ids()

    @cached_property
    def _keys(self) -> tuple[bytes, ...]:
        if self.kind == "process":
            return (_PROCESS_KEK,)
        if self.kind == "file":
            return (self._from_file(),)
        if self.kind == "command":
            return (self._from_command(),)
        parts = [part.strip() for part in os.environ.get(SECRET_KEY_ENV, "").split(",") if part.strip()]
        keys = [_derived(part) for part in parts]
        if self.admin_key:
            keys.append(_derived(self.admin_key))  # opens keys wrapped before ALIGHT_SECRET_KEY was set
        if not keys:
            raise KekError(
                f"no key-encryption key: {SETTING} is `secret` but neither {SECRET_KEY_ENV} nor an admin key is "
                f"set: set {SECRET_KEY_ENV} (make one with: {MAKE_KEY}) or point {SETTING} at a file or command"
            )
        return tuple(keys)

    def _from_file(self) -> bytes:
        path = Path(self.spec).expanduser()
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise KekError(f"cannot read the key file {path} ({SETTING}): {exc.strerror or exc}") from exc
        return parse_key(raw, f"the key file {path} ({SETTING})")

    def _from_command(self) -> bytes:
        where = f"the key command `{self.spec}` ({SETTING})"
        try:
            done = subprocess.run(
                shlex.split(self.spec),
                capture_output=True,
                timeout=COMMAND_TIMEOUT_S,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, ValueError) as exc:
            raise KekError(f"cannot run {where}: {exc}") from exc
        except subprocess.TimeoutExpired as exc:
            raise KekError(f"{where} did not answer within {COMMAND_TIMEOUT_S:.0f} s") from exc
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output on stderr"]
            raise KekError(f"{where} failed with exit status {done.returncode}: {tail[0][:300]}")
        return parse_key(done.stdout, where)
