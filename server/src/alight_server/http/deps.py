"""Typed FastAPI dependencies: the store, the config, and who is calling (admin, a viewer, a reviewer, an attempt)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Depends, HTTPException, Query, Request

from alight.schemas import RewardSource
from alight_server.config import ServerConfig
from alight_server.http.auth import (
    TOKEN_PREFIX,
    AttemptClaims,
    InvalidToken,
    check_admin_key,
    key_fingerprint,
    verify_attempt_token,
)
from alight_server.redaction import Redactor
from alight_server.store import Store
from alight_server.store.base import NotFound

# An attempt token stops working this long after its attempt ended. Until then OTLP spans still land
# (an exporter's last retry in the agent's exit path); events and rewards are refused at once (409).
ENDED_ATTEMPT_GRACE_S = 60.0

log = logging.getLogger("alight.server")

_AUTH_HINT = "send `Authorization: Bearer <admin key>` (or a viewer or reviewer key), or an agent's attempt token on its own routes"
AGENT_ROUTES = "attempt tokens may only call their own agent routes"
VIEWER_SCOPE = "a viewer key only reads (GET) rollouts, trajectories, events, rewards, runs and the dashboard, redacted"
REVIEWER_SCOPE = (
    "a reviewer key reads what a viewer key reads (redacted) and decides the review queue "
    "(POST /api/rollouts/{id}/review), nothing else"
)


def get_store(request: Request) -> Store:
    return request.app.state.store


def get_config(request: Request) -> ServerConfig:
    return request.app.state.config


def bearer_token(request: Request) -> str | None:
    """The Authorization bearer token; Anthropic-style clients send `x-api-key` instead."""
    if (header := request.headers.get("authorization")) is not None:
        scheme, _, value = header.strip().partition(" ")
        return value.strip() or None if scheme.lower() == "bearer" else None
    return request.headers.get("x-api-key") or None


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(401, message, headers={"WWW-Authenticate": "Bearer"})


@dataclass(frozen=True)
class Caller:
    """Who sent the request: the admin, a person reading redacted copies (a viewer or a reviewer key), or one
    attempt's token. A reviewer is a viewer that may also decide reviews: every refusal of a viewer holds for it."""

    admin: bool
    attempt: AttemptClaims | None = None
    viewer: bool = False
    reviewer: str | None = None  # a reviewer key's name (key_fingerprint), never the key

    @property
    def scope(self) -> str:
        """What this person's key may do, for the 403 that refuses it something else."""
        return REVIEWER_SCOPE if self.reviewer else VIEWER_SCOPE

    def require_attempt(self, rollout_id: str, attempt: int | None) -> None:
        """Agents may act only on their own rollout and attempt; the admin on anything."""
        if self.admin:
            return
        assert self.attempt is not None
        mine = self.attempt
        if mine.rollout_id != rollout_id or (attempt is not None and mine.attempt != attempt):
            target = f"rollout {rollout_id!r}" + (f" attempt {attempt}" if attempt is not None else "")
            raise HTTPException(
                403, f"this attempt token is for rollout {mine.rollout_id!r} attempt {mine.attempt}, not {target}"
            )

    def reward_source(self, claimed: RewardSource) -> RewardSource:
        """The source a reward from this caller is stored under, whatever the body claims."""
        if self.admin:
            # the trainer's judge posts its scores under the admin key, as `judge` (trainer/judge/rewards.py)
            return claimed if claimed in (RewardSource.FALLBACK, RewardSource.JUDGE) else RewardSource.EVALUATOR
        if claimed is not RewardSource.AGENT:
            raise HTTPException(
                403,
                f"an attempt token posts agent rewards only, not {claimed.value!r} ones; evaluator rewards "
                "come from the server's evaluator or the admin key",
            )
        return RewardSource.AGENT


def _verified_attempt(request: Request, token: str) -> AttemptClaims:
    """The token's claims, if it is well signed, unexpired, and its attempt did not end long ago."""
    try:
        claims = verify_attempt_token(request.app.state.token_secret, token)
    except InvalidToken as exc:
        raise _unauthorized(f"{exc}; ask the controller for a fresh attempt") from exc
    try:
        rollout = get_store(request).get_rollout(claims.rollout_id)
    except NotFound:
        return claims  # the route answers 404 for the unknown rollout
    row = next((a for a in rollout.attempts if a.attempt == claims.attempt), None)
    ended = row.ended_at if row is not None else None
    if row is not None and ended is not None and (datetime.now(UTC) - ended).total_seconds() > ENDED_ATTEMPT_GRACE_S:
        raise _unauthorized(
            f"attempt token for rollout {claims.rollout_id!r} attempt {claims.attempt} has expired: the "
            f"attempt ended ({row.status.value}) at {ended.isoformat()}; it takes no more writes"
        )
    return claims


def get_caller(request: Request) -> Caller:
    token = bearer_token(request)
    if token is None:
        raise _unauthorized(f"missing credentials: {_AUTH_HINT}")
    if token.startswith(TOKEN_PREFIX):
        return Caller(admin=False, attempt=_verified_attempt(request, token))
    config = get_config(request)
    if check_admin_key(config.admin_key or "", token):
        return Caller(admin=True)
    if any(check_admin_key(key, token) for key in getattr(request.app.state, "viewer_keys", ())):
        return Caller(admin=False, viewer=True)
    if any(check_admin_key(key, token) for key in getattr(request.app.state, "reviewer_keys", ())):
        return Caller(admin=False, viewer=True, reviewer=key_fingerprint(token))
    raise _unauthorized(
        "the admin key does not match this server's, nor does any viewer or reviewer key (check ALIGHT_ADMIN_KEY)"
    )


def _allowing(allowed: Callable[[Caller], bool], needs: str) -> Callable[[Caller], Caller]:
    """A route dependency that lets the callers `allowed` through; the 403 it gives the others says what the route
    `needs`, and what the caller's key may do instead."""

    def check(caller: Annotated[Caller, Depends(get_caller)]) -> Caller:
        if not allowed(caller):
            raise HTTPException(403, f"{needs}; {caller.scope if caller.viewer else AGENT_ROUTES}")
        return caller

    return check


# Routes that write (events, rewards): the admin or an attempt token. Read routes people use: the admin or a viewer
# key. Routes that decide reviews: the admin or a reviewer key.
get_writer = _allowing(lambda c: not c.viewer, "writing needs the admin key or the attempt's token")
require_admin = _allowing(lambda c: c.admin, "this route needs the admin key")
require_reader = _allowing(lambda c: c.admin or c.viewer, "this route needs the admin key or a viewer key")
require_reviewer = _allowing(
    lambda c: bool(c.admin or c.reviewer), "deciding a review needs a reviewer key or the admin key"
)


def get_attempt_token(request: Request) -> AttemptClaims:
    """A valid attempt token, for routes where the token alone names the attempt (/v1/...)."""
    token = bearer_token(request)
    if token is None:
        raise _unauthorized("missing attempt token: send `Authorization: Bearer <ALIGHT_TOKEN>`")
    if not token.startswith(TOKEN_PREFIX):
        raise _unauthorized("this route needs an attempt token (alt1....), not the admin key or another key")
    return _verified_attempt(request, token)


def get_path_attempt(request: Request, claims: Annotated[AttemptClaims, Depends(get_attempt_token)]) -> AttemptClaims:
    """The attempt token, checked against the `{rollout_id}` and `{attempt}` in the path."""
    rollout_id = str(request.path_params.get("rollout_id", ""))
    raw = str(request.path_params.get("attempt", ""))
    if not raw.isdigit():
        raise HTTPException(422, f"attempt in the path must be a positive integer, got {raw!r}")
    Caller(admin=False, attempt=claims).require_attempt(rollout_id, int(raw))
    return claims


def get_redactor(request: Request) -> Redactor:
    """The server's redactor, built from its `redaction:` config on first use and kept on the app."""
    redactor: Redactor | None = getattr(request.app.state, "redactor", None)
    if redactor is None:
        redactor = request.app.state.redactor = Redactor(get_config(request).redaction)
    return redactor


REVEAL_HELP = (
    "true: the exact content as captured (the admin key's reveal permission; logged; a viewer key is refused). "
    "Default: secrets and personal data redacted"
)


def people_copy(
    request: Request,
    caller: Annotated[Caller, Depends(require_reader)],
    reveal: Annotated[bool, Query(description=REVEAL_HELP)] = False,
) -> Redactor | None:
    """How a read route answers: redacted (the redactor), or exact when the admin asked with `reveal=true`."""
    if reveal and not caller.admin:
        raise HTTPException(
            403,
            "reveal=true needs the reveal permission, which only the admin key has; a viewer or reviewer key reads "
            "the redacted copy (drop reveal)",
        )
    if reveal:
        log.info("exact content revealed to the admin key: %s %s", request.method, request.url.path)
        return None
    return get_redactor(request)


def viewer_copy(request: Request, caller: Caller) -> Redactor | None:
    """The redactor when a person's key (viewer or reviewer) reads a route the admin (a machine) reads exact."""
    return get_redactor(request) if caller.viewer else None


StoreDep = Annotated[Store, Depends(get_store)]
ConfigDep = Annotated[ServerConfig, Depends(get_config)]
CallerDep = Annotated[Caller, Depends(get_caller)]
WriterDep = Annotated[Caller, Depends(get_writer)]
ReaderDep = Annotated[Caller, Depends(require_reader)]
AdminDep = Annotated[Caller, Depends(require_admin)]
ReviewerDep = Annotated[Caller, Depends(require_reviewer)]
AttemptTokenDep = Annotated[AttemptClaims, Depends(get_attempt_token)]
AttemptDep = Annotated[AttemptClaims, Depends(get_path_attempt)]
RedactionDep = Annotated[Redactor | None, Depends(people_copy)]
