"""Admin key, people's keys' names, and per-attempt tokens: HMAC-signed, carrying rollout id + attempt, expiring."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

TOKEN_PREFIX = "alt1."


class InvalidToken(Exception):
    """The token is malformed, forged or expired; the message says which."""


@dataclass(frozen=True)
class AttemptClaims:
    rollout_id: str
    attempt: int
    expires_at: float


def generate_admin_key() -> str:
    return "alk_" + secrets.token_urlsafe(32)


def derive_token_secret(admin_key: str) -> bytes:
    """A signing secret distinct from the admin key itself, so tokens never reveal it."""
    return hashlib.sha256(b"alight-attempt-token\0" + admin_key.encode()).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _sign(secret: bytes, body: str) -> str:
    return _b64(hmac.new(secret, body.encode(), hashlib.sha256).digest())


def issue_attempt_token(secret: bytes, rollout_id: str, attempt: int, ttl_s: float, now: float | None = None) -> str:
    claims = {"r": rollout_id, "a": attempt, "e": round((now or time.time()) + ttl_s, 3)}
    body = _b64(json.dumps(claims, separators=(",", ":")).encode())
    return f"{TOKEN_PREFIX}{body}.{_sign(secret, body)}"


def verify_attempt_token(secret: bytes, token: str, now: float | None = None) -> AttemptClaims:
    if not token.startswith(TOKEN_PREFIX) or token.count(".") != 2:
        raise InvalidToken("not an alight attempt token")
    body, sig = token[len(TOKEN_PREFIX) :].split(".")
    # On bytes: compare_digest refuses str with non-ASCII characters, and a header may carry any byte.
    if not hmac.compare_digest(sig.encode(), _sign(secret, body).encode()):
        raise InvalidToken("attempt token signature does not match (issued by another server?)")
    try:
        claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))  # _b64 dropped the padding
        out = AttemptClaims(rollout_id=str(claims["r"]), attempt=int(claims["a"]), expires_at=float(claims["e"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidToken("attempt token body is malformed") from exc
    if out.expires_at < (now or time.time()):
        raise InvalidToken(f"attempt token for rollout {out.rollout_id!r} attempt {out.attempt} has expired")
    return out


def check_admin_key(expected: str, presented: str | None) -> bool:
    return presented is not None and hmac.compare_digest(expected.encode(), presented.encode())


def key_fingerprint(key: str) -> str:
    """The name a person's key is recorded under (a review decision's `reviewer`): never the key itself.

    `python -c "import hashlib; print(hashlib.sha256(b'KEY').hexdigest()[:12])"` tells whose a name is."""
    return hashlib.sha256(key.encode()).hexdigest()[:12]
