"""A rollout's runner `env` at rest: each value sealed, answered as "***", opened only when an attempt is claimed.

Sealed under ALIGHT_SECRET_KEY (store/keys/upstream.py's key, rotation included), else under a key derived from
the admin key (`seal_runner_env_under`); docs/controller.md "`env` values at rest" says which server opens what.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from collections.abc import Callable
from typing import Any, TypeVar

from cryptography.fernet import Fernet, InvalidToken

from alight.schemas import Rollout, RolloutCreate, RunnerSpec
from alight_server.store.base import StoreError
from alight_server.store.keys import upstream as upstream_keys

MASK = "***"
R = TypeVar("R", Rollout, RolloutCreate)
SEALED = "sealed:"  # the prefix of a stored value; one without it was stored before sealing and is opened as is


class RunnerEnvError(StoreError):
    """A stored runner env value that this server cannot open (sealed under another key)."""


class RunnerEnvBox:
    """Seals and opens runner env values for one store: ALIGHT_SECRET_KEY when set, else the server's derived key
    (a key of this instance's own until the server hands one over)."""

    def __init__(self) -> None:
        self._memory_key = Fernet(Fernet.generate_key())  # used only while ALIGHT_SECRET_KEY is unset

    def derive_fallback(self, secret: str) -> None:
        """Seal (without ALIGHT_SECRET_KEY) under a key derived from `secret`, the server's admin key."""
        digest = hashlib.sha256(b"alight-runner-env\0" + secret.encode()).digest()
        self._memory_key = Fernet(base64.urlsafe_b64encode(digest))

    def sealed(self, runner: RunnerSpec | None) -> dict[str, Any] | None:
        """The runner spec as the store keeps it: every env value sealed."""
        if runner is None:
            return None
        data = runner.model_dump(mode="json")
        data["env"] = {name: SEALED + self._seal(value) for name, value in runner.env.items()}
        return data

    def same_values(self, rollout_id: str, stored: str | None, runner: RunnerSpec | None) -> bool:
        """Whether the runner column `stored` holds exactly `runner`'s env values (a retried create's check);
        RunnerEnvError when a stored value cannot be opened to compare."""
        stored_env: dict[str, str] = ((json.loads(stored) if stored else None) or {}).get("env") or {}
        given = runner.env if runner is not None else {}
        if set(stored_env) != set(given):
            return False
        return all(self._open(rollout_id, name, value) == given[name] for name, value in stored_env.items())

    def opened(self, rollout: Rollout) -> Rollout:
        """The rollout with its runner env values readable again; RunnerEnvError when one cannot be opened."""
        return _env_replaced(rollout, lambda name, value: self._open(rollout.id, name, value))

    def _seal(self, value: str) -> str:
        if upstream_keys.has_secret_key():
            return upstream_keys.seal(value)
        return self._memory_key.encrypt(value.encode()).decode()

    def _open(self, rollout_id: str, name: str, value: str) -> str:
        if not value.startswith(SEALED):
            return value
        token = value.removeprefix(SEALED)
        if upstream_keys.has_secret_key():
            # Failing: sealed in memory by this process before the key was set, or under another key.
            with contextlib.suppress(upstream_keys.UpstreamKeyError):
                return upstream_keys.unseal(f"runner env {name}", token)
        try:
            return self._memory_key.decrypt(token.encode()).decode()
        except InvalidToken:
            raise RunnerEnvError(
                f"rollout {rollout_id!r}: its runner env value {name!r} was sealed under a key this server does "
                f"not have (a server restarted without {upstream_keys.SECRET_KEY_ENV}, or with another one); start "
                f"the server with the {upstream_keys.SECRET_KEY_ENV} it was created under (make one for the future "
                f"with: {upstream_keys.MAKE_KEY}), or create the rollout again"
            ) from None


def without_values(item: RolloutCreate) -> RolloutCreate:
    """The create with its runner env values blanked: what the stored body hash covers, so that no hash of a
    secret (which a guess could be checked against) is kept; `same_values` compares the values themselves."""
    return _env_replaced(item, lambda _name, _value: "")


def masked(rollout: Rollout) -> Rollout:
    """The rollout as every reader but the controller sees it: its runner env names, each value "***"."""
    return _env_replaced(rollout, lambda _name, _value: MASK)


def _env_replaced(item: R, value_of: Callable[[str, str], str]) -> R:
    """`item` with each of its runner env values replaced by `value_of(name, value)`."""
    runner = item.runner
    if runner is None or not runner.env:
        return item
    env = {name: value_of(name, value) for name, value in runner.env.items()}
    return item.model_copy(update={"runner": runner.model_copy(update={"env": env})})
