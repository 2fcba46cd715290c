"""What rollouts cost: tokens, model-seconds, sandbox-seconds and money from a price table (`prices:` in a train
config), and the cost per successful task and per accepted patch (what each is made of: docs/training.md, "Cost").

One function, `cost_summary`, makes these numbers for `alight eval`'s report, each training step's metrics
(`cost/...`) and the dashboard's run page, so the three never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, astuple, dataclass
from typing import Any

from pydantic import Field

from alight.schemas import Rollout, Strict, Trajectory
from alight.schemas.calls import ModelCall

__all__ = ["Cost", "CostSummary", "Prices", "TokenPrice", "cost_summary", "rollout_cost"]

MILLION = 1_000_000


class TokenPrice(Strict):
    """An external upstream's price, in USD per million tokens."""

    prompt: float = Field(ge=0, description="USD per million prompt (input) tokens")
    completion: float = Field(ge=0, description="USD per million completion (output) tokens")


class Prices(Strict):
    """The price table (`prices:` in a train config); unset, a report gives tokens and seconds but no money."""

    # Upstream id (as the gateway routes to it) or model name (as the agent asked for it) -> token prices.
    tokens: dict[str, TokenPrice] = Field(default_factory=dict[str, TokenPrice])
    device_second: float = Field(default=0.0, ge=0, description="USD per model-second of local inference")
    sandbox_second: float = Field(default=0.0, ge=0, description="USD per second of an attempt's wall time")

    def token_price(self, call: ModelCall) -> TokenPrice | None:
        """The call's token price: by its upstream id, else by the model it asked for; None: local inference."""
        model = call.request.get("model")
        for key in (call.upstream, model if isinstance(model, str) else None):
            if key is not None and key in self.tokens:
                return self.tokens[key]
        return None


@dataclass
class Cost:
    """One rollout's cost, or several rollouts' summed (`+`)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_seconds: float = 0.0
    sandbox_seconds: float = 0.0
    usd: float = 0.0  # 0 without a price table

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Cost) -> Cost:
        return Cost(*(mine + theirs for mine, theirs in zip(astuple(self), astuple(other), strict=True)))


def rollout_cost(trajectory: Trajectory, rollout: Rollout | None, prices: Prices | None) -> Cost:
    """The cost of the trajectory's attempt (docs/training.md, "Cost"); its sandbox time from `rollout`'s record of
    that attempt (0 when the attempt has not ended, or without the rollout)."""
    cost = Cost()
    for tc in trajectory.calls:
        call = tc.call
        prompt, completion = len(call.prompt_token_ids), len(call.response_token_ids)
        seconds = (call.latency_ms or 0.0) / 1000
        cost.prompt_tokens += prompt
        cost.completion_tokens += completion
        cost.model_seconds += seconds
        if prices is not None:
            price = prices.token_price(call)
            cost.usd += (
                (prompt * price.prompt + completion * price.completion) / MILLION
                if price is not None
                else seconds * prices.device_second
            )
    attempt = next((a for a in rollout.attempts if a.attempt == trajectory.attempt), None) if rollout else None
    if attempt is not None and attempt.ended_at is not None:
        cost.sandbox_seconds = max(0.0, (attempt.ended_at - attempt.started_at).total_seconds())
        cost.usd += cost.sandbox_seconds * (prices.sandbox_second if prices is not None else 0.0)
    return cost


def accepted_patch(trajectory: Trajectory, success_at: float) -> bool:
    """A coding task's success that no gate flagged (module docstring)."""
    success = trajectory.final_reward is not None and trajectory.final_reward >= success_at
    unflagged = not trajectory.gate_flags or (trajectory.review == "accepted" and not trajectory.gate_flagged)
    return trajectory.gated and success and unflagged


@dataclass
class CostSummary:
    """Rollouts' total cost and what a success and an accepted patch cost (NaN where there are none)."""

    rollouts: int
    successes: int  # final reward >= success_at
    coding_rollouts: int  # graded by the coding kit: the only ones that can have an accepted patch
    accepted_patches: int
    total: Cost
    priced: bool  # a price table was given: `total.usd` and the per-success money mean something

    def per(self, n: int) -> dict[str, float]:
        """The total's tokens, seconds and money over `n` (NaN when n is 0; money NaN without prices)."""
        totals = {"tokens": self.total.tokens, **asdict(self.total)}
        return {k: v / n if n and (k != "usd" or self.priced) else math.nan for k, v in totals.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CostSummary:
        """A summary as `as_dict` wrote it (report.json); the per-unit figures are made again from the totals."""
        names = ("rollouts", "successes", "coding_rollouts", "accepted_patches", "priced")
        return cls(**{name: data[name] for name in names}, total=Cost(**data["total"]))

    def as_dict(self) -> dict[str, Any]:
        """JSON: the per-unit figures None where there is no unit (JSON has no NaN)."""
        units = {"per_success": self.successes, "per_accepted_patch": self.accepted_patches}
        per = {key: {k: None if math.isnan(v) else v for k, v in self.per(n).items()} for key, n in units.items()}
        return {**asdict(self), **per}

    def metrics(self, prefix: str = "cost/") -> dict[str, float]:
        """Flat metrics for a training step: totals, then `tokens_per_success`, `usd_per_success`, ... (the
        per-patch ones only where a rollout was a coding task); NaN values left out."""
        out = {k: float(v) for k, v in asdict(self.total).items() if k != "usd" or self.priced}
        out["successes"] = float(self.successes)
        out.update({f"{k}_per_success": v for k, v in self.per(self.successes).items()})
        if self.coding_rollouts:
            out["accepted_patches"] = float(self.accepted_patches)
            out.update({f"{k}_per_accepted_patch": v for k, v in self.per(self.accepted_patches).items()})
        return {prefix + k: v for k, v in out.items() if not math.isnan(v)}

    def lines(self) -> list[str]:
        """The report's lines for people."""
        per_success, per_patch = self.per(self.successes), self.per(self.accepted_patches)
        money = f", ${self.total.usd:.6f}" if self.priced else " (no prices: in the config)"
        lines = [
            f"  cost           {self.total.prompt_tokens} prompt + {self.total.completion_tokens} completion tokens, "
            f"{self.total.model_seconds:.1f} model-s, {self.total.sandbox_seconds:.1f} sandbox-s{money}",
            f"  per success    {_per(per_success, self.priced)} ({self.successes} of {self.rollouts} rollouts succeeded)",
        ]
        if self.coding_rollouts:
            accepted = f"{self.accepted_patches} of {self.coding_rollouts} coding rollouts accepted"
            lines.append(f"  per accepted patch {_per(per_patch, self.priced)} ({accepted})")
        return lines


def _per(values: Mapping[str, float], priced: bool) -> str:
    if math.isnan(values["tokens"]):
        return "- (none)"
    money = f", ${values['usd']:.6f}" if priced else ""
    return (
        f"{values['tokens']:.0f} tokens, {values['model_seconds']:.2f} model-s, "
        f"{values['sandbox_seconds']:.2f} sandbox-s{money}"
    )


def cost_summary(
    rollouts: Sequence[Rollout], trajectories: Sequence[Trajectory], prices: Prices | None, success_at: float
) -> CostSummary:
    """The cost of `trajectories` (one per rollout: its latest attempt), their successes and accepted patches."""
    by_id = {r.id: r for r in rollouts}
    total = sum((rollout_cost(t, by_id.get(t.rollout_id), prices) for t in trajectories), Cost())
    return CostSummary(
        rollouts=len(trajectories),
        successes=sum(1 for t in trajectories if t.final_reward is not None and t.final_reward >= success_at),
        coding_rollouts=sum(1 for t in trajectories if t.gated),
        accepted_patches=sum(1 for t in trajectories if accepted_patch(t, success_at)),
        total=total,
        priced=prices is not None,
    )
