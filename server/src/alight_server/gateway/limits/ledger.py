"""What each attempt has spent and what each run and upstream may still send: the gateway's limit checks.

Counted in this gateway process (several replicas each count their own calls); a breach of a budget is
written to the store as the attempt's `budget_exceeded` event, which decides how the attempt ends (verdict.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from alight.schemas import AttemptFinish, Rollout
from alight_server.config import GatewayLimits, RateLimit
from alight_server.gateway.callers import CallerAttempt
from alight_server.gateway.limits.buckets import Rate
from alight_server.gateway.limits.refusals import Refusal
from alight_server.gateway.limits.verdict import budget_verdict
from alight_server.gateway.metrics import GatewayMetrics
from alight_server.gateway.upstream.pool import Target
from alight_server.store.base import Store


@dataclass
class Spent:
    run: str
    started_at: float  # the attempt's start, seconds since the epoch
    calls: int = 0  # admitted
    tokens: int = 0  # prompt + completion, of the calls answered
    completion_tokens: int = 0
    breached: bool = False


class Limits:
    """gateway.limits applied: `admit` counts a call or refuses it, `spent` charges its tokens once it answered."""

    def __init__(self, config: GatewayLimits, metrics: GatewayMetrics) -> None:
        self.config = config
        self.metrics = metrics
        budgeted = any(v is not None for v in config.attempt.model_dump().values())
        self.active = budgeted or _limits(config.run) or bool(config.upstreams)  # else every check is skipped
        self._attempts: dict[tuple[str, int], Spent] = {}
        self._runs: dict[str, Rate] = {}
        self._upstreams: dict[str, Rate | None] = {}

    def admit(self, caller: CallerAttempt) -> Refusal | None:
        """Count the call against its attempt and run, or say why it is refused (counting nothing)."""
        if not self.active:
            return None
        key = (caller.rollout_id, caller.attempt)
        spent = self._attempts.get(key) or self._attempts.setdefault(key, Spent(caller.run, caller.started_at))
        refusal = self._over_budget(spent)
        if refusal is not None:
            self.metrics.budget_refused(spent.run, refusal.limit)
            return refusal
        now = time.monotonic()
        rate = self._run_rate(spent.run, now)
        if rate is not None:
            if (over := rate.wait(now)) is not None:
                what, wait = over
                self.metrics.rate_limited(spent.run, f"run_{what}")
                per_minute = getattr(self.config.run, f"{what}_per_minute")
                message = f"Rate limit reached for {what} of run {spent.run or '(no run_dir)'}: {per_minute:g}/min"
                return Refusal(f"run_{what}", f"{message} (gateway.limits.run)", wait)
            rate.take(now)
        spent.calls += 1
        return None

    def _over_budget(self, spent: Spent) -> Refusal | None:
        budget = self.config.attempt
        for limit, used, allowed in (
            ("calls", spent.calls, budget.calls),
            ("tokens", spent.tokens, budget.tokens),
            ("completion_tokens", spent.completion_tokens, budget.completion_tokens),
            ("wall_s", time.time() - spent.started_at, budget.wall_s),
        ):
            if allowed is not None and used >= allowed:
                first, spent.breached = not spent.breached, True
                message = (
                    f"this attempt has spent its budget of {allowed:g} {limit.replace('_s', ' seconds')} "
                    f"(used {used:.6g}; gateway.limits.attempt.{limit}); it takes no more model calls"
                )
                return Refusal(limit, message, first=first)
        return None

    def upstream_targets(self, targets: list[Target], caller: CallerAttempt) -> list[Target] | Refusal:
        """The targets with room under their upstream's rate, in routing order (the first is charged a request).

        A refusal gives the call back to its attempt's budget: like a provider's 429, it spent nothing.
        """
        if not self.config.upstreams:
            return targets
        now = time.monotonic()
        open_, waits = [], []
        for target in targets:
            rate = self._upstream_rate(target.id, now)
            over = None if rate is None else rate.wait(now)
            if over is None:
                open_.append(target)
            else:
                waits.append((over[1], over[0], target.id))
        if open_:
            rate = self._upstream_rate(open_[0].id, now)
            if rate is not None:
                rate.take(now)
            return open_
        wait, what, upstream = min(waits)
        if (spent := self._attempts.get((caller.rollout_id, caller.attempt))) is not None:
            spent.calls -= 1
        self.metrics.rate_limited(caller.run, f"upstream_{what}")
        message = f"Rate limit reached for {what} of upstream {upstream} (gateway.limits.upstreams)"
        return Refusal(f"upstream_{what}", message, wait)

    def spent(self, rollout_id: str, attempt: int, upstream: str | None, tokens: tuple[int, int]) -> None:
        """An answered call's (prompt, completion) tokens, charged to its attempt, run and upstream."""
        if not self.active:
            return
        now, total = time.monotonic(), tokens[0] + tokens[1]
        spent = self._attempts.get((rollout_id, attempt))
        if spent is not None:
            spent.tokens += total
            spent.completion_tokens += tokens[1]
            if (rate := self._runs.get(spent.run)) is not None:
                rate.spent(total, now)
        if upstream is not None and (rate := self._upstream_rate(upstream, now)) is not None:
            rate.spent(total, now)

    def verdict(self, store: Store, rollout: Rollout, attempt: int, finish: AttemptFinish) -> AttemptFinish:
        """The attempt's end as recorded (verdict.py); its count here is dropped, it takes no more calls."""
        self._attempts.pop((rollout.id, attempt), None)
        return budget_verdict(store, rollout, attempt, finish)

    def _run_rate(self, run: str, now: float) -> Rate | None:
        if not _limits(self.config.run):
            return None
        rate = self._runs.get(run)
        if rate is None:
            rate = self._runs[run] = Rate(self.config.run, now)
        return rate

    def _upstream_rate(self, upstream: str, now: float) -> Rate | None:
        if upstream not in self._upstreams:
            limit = self.config.upstreams.get(upstream, self.config.upstreams.get("*"))
            self._upstreams[upstream] = None if limit is None or not _limits(limit) else Rate(limit, now)
        return self._upstreams[upstream]


def _limits(rate: RateLimit) -> bool:
    return rate.requests_per_minute is not None or rate.tokens_per_minute is not None
