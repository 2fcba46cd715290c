"""The judge's calls: one OpenAI-compatible chat call per judgement, retried on transient errors and counted
against the run's rate budget (`limits.run`, `limits.upstreams`). They go straight to the judge's endpoint, never
through the gateway's agent routes, so they are never recorded nor trained on as the agent's model calls; each is
recorded as a `judgement` event beside the rollouts it scored instead (rewards.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from alight_server.config import RateLimit
from alight_server.gateway.limits.buckets import Rate
from alight_server.gateway.upstream.proxy import backoff_s

TRANSIENT = {408, 409, 425, 429, 500, 502, 503, 504}
# The gateway's backoff with a judge's patience: jitter from 0.5 s doubling, a Retry-After honoured up to 30 s.
BACKOFF_BASE_S, BACKOFF_CAP_S = 0.5, 30.0


class JudgeFailed(RuntimeError):
    """The judge gave no usable answer after its tries: an infrastructure failure, never a zero reward."""


@dataclass(frozen=True)
class Endpoint:
    """Where the judge is served: an OpenAI-compatible base URL (…/v1), its key and the model name sent."""

    base_url: str
    api_key: str
    model: str


@dataclass(frozen=True)
class JudgeReply:
    """One answered judge call."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    tries: int
    top_logprobs: list[tuple[str, float]]  # the first token's alternatives, when the call asked for logprobs


class JudgeCaller:
    """Calls the judge; thread-safe (judgements of several groups run at once)."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        retries: int,
        timeout_s: float,
        sampling: dict[str, Any],
        budget: RateLimit | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.endpoint, self.retries, self.timeout_s = endpoint, retries, timeout_s
        self.sampling = sampling  # JudgeConfig.sampling(): max_tokens, temperature, logprobs
        self.clock, self.sleep = clock, sleep
        limited = budget is not None and (budget.requests_per_minute or budget.tokens_per_minute)
        self.rate = Rate(budget, clock()) if limited and budget is not None else None
        self.lock = threading.Lock()
        self.http = httpx.Client(timeout=timeout_s)
        self.calls = 0  # answered or not, for the run's judge metrics
        self.tokens = 0

    def close(self) -> None:
        self.http.close()

    def _admit(self) -> None:
        """Wait for the run's budget to allow one more call; JudgeFailed when that wait is past one try's time."""
        if self.rate is None:
            return
        with self.lock:
            over = self.rate.wait(self.clock())
            if over is not None and over[1] > self.timeout_s:
                raise JudgeFailed(f"the run's budget (limits.run {over[0]} per minute) allows no judge call "
                                  f"for {over[1]:.0f} s, past judge.timeout_s {self.timeout_s:g}")  # fmt: skip
            if over is not None:
                self.sleep(over[1])
            self.rate.take(self.clock())

    def complete(self, messages: list[dict[str, str]]) -> JudgeReply:
        """The judge's answer to `messages`; JudgeFailed after `retries` more tries on transient errors."""
        body: dict[str, Any] = {"model": self.endpoint.model, "messages": messages, **self.sampling}
        headers = {"Authorization": f"Bearer {self.endpoint.api_key}"}
        url = self.endpoint.base_url.rstrip("/") + "/chat/completions"
        problem = "no try made"
        for attempt in range(self.retries + 1):
            self._admit()
            started = self.clock()
            with self.lock:
                self.calls += 1
            try:
                response = self.http.post(url, json=body, headers=headers)
            except httpx.TransportError as exc:  # timeouts, refused connections
                problem, retry_after = f"{type(exc).__name__}: {exc}", None
            else:
                if response.status_code == 200:
                    return self._reply(response, self.clock() - started, attempt + 1)
                if response.status_code not in TRANSIENT:
                    raise JudgeFailed(f"the judge at {url} answered HTTP {response.status_code}: {response.text[:300]}")
                problem = f"HTTP {response.status_code}: {response.text[:200]}"
                retry_after = response.headers.get("retry-after")
            if attempt < self.retries:  # no wait after the last try: nothing follows it
                self.sleep(backoff_s(attempt, retry_after, base_s=BACKOFF_BASE_S, cap_s=BACKOFF_CAP_S))
        raise JudgeFailed(f"the judge at {url} failed {self.retries + 1} tries; last: {problem}")

    def _reply(self, response: httpx.Response, latency_s: float, tries: int) -> JudgeReply:
        try:
            payload = response.json()
            text = payload["choices"][0]["message"]["content"] or ""
            first = payload["choices"][0]["logprobs"]["content"][0] if self.sampling.get("logprobs") else {}
            top = [(str(t["token"]), float(t["logprob"])) for t in first.get("top_logprobs", [])]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            what = "a chat completion with logprobs" if self.sampling.get("logprobs") else "a chat completion"
            raise JudgeFailed(f"the judge's answer is not {what}: {response.text[:300]!r}") from exc
        use = payload.get("usage") or {}
        prompt, completion = int(use.get("prompt_tokens") or 0), int(use.get("completion_tokens") or 0)
        with self.lock:
            self.tokens += prompt + completion
            if self.rate is not None:
                self.rate.spent(prompt + completion, self.clock())
        return JudgeReply(str(text), prompt, completion, latency_s, tries, top)
