"""The check report: what the sample builder would make of a run's trajectories, before anyone trains on them.

The builder and its break classifier are the trainer's own (`build_samples`, `breaks.classify_break`); a
trajectory without a reward yet counts as reward 0 here, so the check needs no scoring first.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from alight.api_models import RolloutQuery
from alight.schemas import Rollout, Trajectory
from alight_server.store.base import Store
from alight_server.traces.importer import UNRENDERED_EVENT
from alight_server.trainer.step.samples import SampleConfig, build_samples
from alight_server.trainer.step.samples.breaks import Decode, classify_break, common_prefix_length
from alight_server.trajectories.join import build_trajectory

_CONTEXT = 3  # tokens shown after the first differing one


@dataclass
class Divergence:
    """Call k+1's prompt does not start with call k's prompt + response: where, and what differs."""

    call: int  # seq of call k+1
    previous: int  # seq of call k
    position: int  # first differing token index
    cause: str  # what the builder's classifier calls it (or new_conversation)
    expected_ids: list[int]  # call k's prompt + response from `position`
    prompt_ids: list[int]  # call k+1's prompt from `position`
    expected_text: str | None = None
    prompt_text: str | None = None


@dataclass
class TrajectoryCheck:
    rollout_id: str
    source: str | None
    calls: int
    exact: int
    rendered: int
    left_out: int
    rows: int
    conversations: int  # rows started as a new conversation: the first call's, then each sub-agent's or fresh task's
    breaks: dict[str, int]
    divergences: list[Divergence] = field(default_factory=list)
    unrendered: list[str] = field(default_factory=list)


@dataclass
class CheckReport:
    run_id: str
    trajectories: list[TrajectoryCheck]
    build: dict[str, Any]  # the builder's totals (BuildReport.metrics without prefix)
    breaks: dict[str, int]
    truncated_rows: int
    truncated_tokens: int
    dropped_calls: dict[str, int]
    unscored: int  # trajectories checked with reward 0 for want of one

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_rollouts(store: Store, run_id: str) -> list[Rollout]:
    found: list[Rollout] = []
    since = 0
    while page := store.list_rollouts(RolloutQuery(id_prefix=f"{run_id}-", since_seq=since, limit=500)):
        found.extend(page)
        since = page[-1].seq
    return sorted(found, key=lambda r: r.id)


def check_run(
    store: Store, run_id: str, config: SampleConfig | None = None, decode: Decode | None = None
) -> CheckReport:
    config = config or SampleConfig()
    rollouts = [r for r in run_rollouts(store, run_id) if r.attempts]
    trajectories = [build_trajectory(store, r.id) for r in rollouts]
    unscored = sum(t.final_reward is None for t in trajectories)
    scored = [t if t.final_reward is not None else t.model_copy(update={"final_reward": 0.0}) for t in trajectories]
    _, total = build_samples(scored, config, decode)
    checks = [_trajectory(store, r, t, config, decode) for r, t in zip(rollouts, scored, strict=True)]
    return CheckReport(
        run_id=run_id,
        trajectories=checks,
        build={k.removeprefix("samples/"): v for k, v in total.metrics().items()},
        breaks={str(k): v for k, v in total.breaks.items()},
        truncated_rows=total.truncated_rows,
        truncated_tokens=total.truncated_tokens,
        dropped_calls=dict(total.dropped_calls),
        unscored=unscored,
    )


def _trajectory(
    store: Store, rollout: Rollout, trajectory: Trajectory, config: SampleConfig, decode: Decode | None
) -> TrajectoryCheck:
    _, own = build_samples([trajectory], config, decode)
    calls = [tc.call for tc in sorted(trajectory.calls, key=lambda tc: tc.call.seq)]
    rendered = sum(c.rendered for c in calls)
    unrendered = [str(e.payload.get("message")) for e in store.list_events(rollout.id, kind=UNRENDERED_EVENT)]
    offline = rollout.metadata.get("offline")
    return TrajectoryCheck(
        rollout_id=rollout.id,
        source=str(offline.get("source")) if isinstance(offline, dict) else None,
        calls=len(calls),
        exact=len(calls) - rendered,
        rendered=rendered,
        left_out=len(unrendered),
        rows=own.rows,
        conversations=own.conversations,
        breaks={str(k): v for k, v in own.breaks.items()},
        divergences=divergences(calls, decode),
        unrendered=unrendered,
    )


def divergences(calls: Sequence[Any], decode: Decode | None = None) -> list[Divergence]:
    """Each consecutive pair of calls where the later prompt does not continue the earlier prompt + response."""
    import numpy as np

    out: list[Divergence] = []
    for previous, call in itertools.pairwise(calls):
        expected = np.asarray(previous.prompt_token_ids + previous.response_token_ids, dtype=np.int64)
        prompt = np.asarray(call.prompt_token_ids, dtype=np.int64)
        at = common_prefix_length(expected, prompt)
        if at == len(expected):
            continue
        found = Divergence(
            call=call.seq,
            previous=previous.seq,
            position=at,
            cause=classify_break(call, previous, expected, prompt, decode),
            expected_ids=expected[at : at + 1 + _CONTEXT].tolist(),
            prompt_ids=prompt[at : at + 1 + _CONTEXT].tolist(),
        )
        if decode is not None:
            found.expected_text, found.prompt_text = decode(found.expected_ids), decode(found.prompt_ids)
        out.append(found)
    return out
