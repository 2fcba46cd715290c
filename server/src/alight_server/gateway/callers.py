"""Which attempt a gateway call belongs to: the token, the path, and the rollout's live state."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio.to_thread

from alight.schemas import TERMINAL_STATES, AttemptStatus, Mode
from alight_server.gateway.errors import GatewayError
from alight_server.http.auth import AttemptClaims, InvalidToken, verify_attempt_token
from alight_server.store.base import NotFound, Store

# A live rollout's state is re-read at most this often per attempt when nothing tells the
# gateway of its changes: finishing an attempt takes effect within this window, and the hot
# path skips a database read per call. While `followed()` (the gateway's store sync, which
# forgets each rollout that changed) holds, the state is kept until it changes instead, so a
# call never waits on a read after its attempt's first. Terminal states are cached for good.
LIVE_STATE_TTL_S = 0.5
# Verified tokens are remembered (an attempt sends the same token on every call, and the
# HMAC is the costliest step of admission); past this many the memory starts afresh.
MAX_VERIFIED_TOKENS = 65536


@dataclass(frozen=True)
class CallerAttempt:
    rollout_id: str
    attempt: int
    mode: Mode
    run: str = ""  # the rollout's metadata.run_dir (alight train sets it): whose rate limit the call counts under
    started_at: float = 0.0  # the attempt's start, seconds since the epoch (its wall-time budget)


@dataclass
class _Cached:
    attempt: CallerAttempt | None
    refusal: GatewayError | None
    expires_at: float


def presented_token(authorization: str | None, api_key: str | None) -> str | None:
    """`Authorization: Bearer <token>` (OpenAI clients) or `x-api-key` (Anthropic clients)."""
    if authorization:
        scheme, _, value = authorization.partition(" ")
        return value.strip() if scheme.lower() == "bearer" else authorization.strip()
    return api_key.strip() if api_key else None


class AttemptResolver:
    def __init__(
        self, store: Store, token_secret: Callable[[], bytes], followed: Callable[[], bool] = lambda: False
    ) -> None:
        self.store = store
        self.secret = token_secret
        self.followed = followed  # True while every change to a rollout reaches `forget` promptly
        self._cache: dict[str, dict[int, _Cached]] = {}  # rollout id -> attempt -> state
        self._verified: dict[str, AttemptClaims] = {}
        self._verified_with: bytes | None = None
        # Bumped by `forget`: a load that raced with it is used once but not cached.
        self._epoch = 0

    def forget(self, rollout_id: str) -> None:
        """Drop cached state of a rollout (call after finishing or cancelling it); safe from any thread."""
        self._epoch += 1
        self._cache.pop(rollout_id, None)

    def forget_all(self) -> None:
        self._epoch += 1
        self._cache = {}

    async def resolve(self, token: str | None, path_rollout: str | None, path_attempt: int | None) -> CallerAttempt:
        if not token:
            raise GatewayError(401, "missing API key: send this attempt's token as `Authorization: Bearer <token>`")
        claims = self._claims(token)
        if path_rollout is not None and (claims.rollout_id, claims.attempt) != (path_rollout, path_attempt):
            raise GatewayError(
                403,
                f"this token belongs to rollout {claims.rollout_id!r} attempt {claims.attempt}, "
                f"not rollout {path_rollout!r} attempt {path_attempt}; use the gateway URL handed out with the token",
            )
        rollout_id, attempt = claims.rollout_id, claims.attempt
        cached = self._cache.get(rollout_id, {}).get(attempt)
        if cached is None or (cached.expires_at < time.monotonic() and not self.followed()):
            epoch = self._epoch
            cached = await anyio.to_thread.run_sync(self._load, rollout_id, attempt)
            if epoch == self._epoch:
                self._cache.setdefault(rollout_id, {})[attempt] = cached
        if cached.refusal is not None:
            raise cached.refusal
        assert cached.attempt is not None
        return cached.attempt

    def _claims(self, token: str) -> AttemptClaims:
        """The token's claims; a token verified before is only checked for expiry again."""
        secret = self.secret()
        if secret != self._verified_with:  # a new secret voids every earlier verification
            self._verified, self._verified_with = {}, secret
        claims = self._verified.get(token)
        if claims is not None and claims.expires_at >= time.time():
            return claims
        try:
            claims = verify_attempt_token(secret, token)
        except InvalidToken as exc:
            self._verified.pop(token, None)
            raise GatewayError(401, f"invalid API key: {exc}") from exc
        if len(self._verified) >= MAX_VERIFIED_TOKENS:
            self._verified = {}
        self._verified[token] = claims
        return claims

    def _load(self, rollout_id: str, attempt: int) -> _Cached:
        try:
            rollout = self.store.get_rollout(rollout_id)
        except NotFound:
            return _Cached(None, GatewayError(404, f"rollout {rollout_id!r} does not exist"), float("inf"))
        if rollout.state in TERMINAL_STATES:
            refusal = GatewayError(
                409, f"rollout {rollout_id!r} is {rollout.state.value}; it takes no more model calls"
            )
            return _Cached(None, refusal, float("inf"))
        row = next((a for a in rollout.attempts if a.attempt == attempt), None)
        if row is None or row.status != AttemptStatus.RUNNING:
            state = "was never started" if row is None else f"is {row.status.value}"
            refusal = GatewayError(409, f"attempt {attempt} of rollout {rollout_id!r} {state}; it takes no model calls")
            # A finished attempt stays finished; one not yet claimed may start soon.
            expires = time.monotonic() + LIVE_STATE_TTL_S if row is None else float("inf")
            return _Cached(None, refusal, expires)
        run = rollout.metadata.get("run_dir")
        found = CallerAttempt(
            rollout_id, attempt, rollout.mode, run if isinstance(run, str) else "", row.started_at.timestamp()
        )
        return _Cached(found, None, time.monotonic() + LIVE_STATE_TTL_S)
