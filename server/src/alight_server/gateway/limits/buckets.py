"""Token buckets per minute: a rate limit that refills continuously, as the providers' own do."""

from __future__ import annotations

from alight_server.config import RateLimit


class Bucket:
    """`per_minute` units, refilled continuously, holding a minute's worth at most; it starts full.

    Spending may take it below zero (a call's tokens are known only once it answered): the debt is
    repaid by the refill before the next call is admitted.
    """

    def __init__(self, per_minute: float, now: float) -> None:
        self.rate = per_minute / 60  # units per second
        self.capacity = self.level = per_minute
        self.at = now

    def wait_s(self, need: float, now: float) -> float:
        """Seconds until `need` units are there; 0 when they are now."""
        self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
        self.at = now
        return max(0.0, (need - self.level) / self.rate)

    def spend(self, amount: float, now: float) -> None:
        self.wait_s(0, now)
        self.level -= amount


class Rate:
    """One RateLimit's buckets (requests, tokens) for one run or one upstream."""

    def __init__(self, limit: RateLimit, now: float) -> None:
        self.limit = limit
        rpm, tpm = limit.requests_per_minute, limit.tokens_per_minute
        self.requests = None if rpm is None else Bucket(rpm, now)
        self.tokens = None if tpm is None else Bucket(tpm, now)

    def wait(self, now: float) -> tuple[str, float] | None:
        """("requests" or "tokens", seconds to wait) when a call now would be over a limit, else None."""
        if self.requests is not None and (wait := self.requests.wait_s(1, now)) > 0:
            return "requests", wait
        if self.tokens is not None and (wait := self.tokens.wait_s(1, now)) > 0:
            return "tokens", wait
        return None

    def take(self, now: float) -> None:
        if self.requests is not None:
            self.requests.spend(1, now)

    def spent(self, tokens: int, now: float) -> None:
        if self.tokens is not None:
            self.tokens.spend(tokens, now)
