"""The run's side of the judge (`judge:`): it judges a step's groups, or each group as its last member ends (async).

A group the judge failed on is marked `infra` in the trainer's copy only (the rollouts ended as they did), so
every count and filter that leaves infra failures out leaves it out, and no reward is read as a zero."""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor

from alight.client import AlightClient
from alight.schemas import FailureKind, Trajectory
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.judge.caller import JudgeCaller
from alight_server.trainer.judge.endpoint import resolve_endpoint
from alight_server.trainer.judge.rewards import Judge
from alight_server.trainer.run.rollouts import RolloutPhase, collect, tally


class Judging:
    """Judges groups of a run's rollouts, several at once (`judge.concurrency`)."""

    def __init__(self, judge: Judge, client: AlightClient) -> None:
        self.judge, self.client = judge, client
        self.workers = ThreadPoolExecutor(judge.config.concurrency, thread_name_prefix="alight-judge")

    @classmethod
    def from_config(cls, config: TrainConfig, client: AlightClient) -> Judging | None:
        """The run's judging; None without `judge:`."""
        cfg = config.judge
        if cfg is None:
            return None
        caller = JudgeCaller(resolve_endpoint(cfg, client), retries=cfg.retries, timeout_s=cfg.timeout_s,
                             sampling=cfg.sampling(), budget=config.limits.run)  # fmt: skip
        return cls(Judge(cfg, cfg.rubric, caller, client), client)

    @property
    def bound_s(self) -> float:
        """How long a judgement may stay in flight before its group is given up (an update waits no longer)."""
        return self.judge.config.tries_bound_s() + 5.0

    def submit(self, phase: RolloutPhase) -> Future[RolloutPhase]:
        """Judge one group's finished phase in the background; the future holds the phase as judged."""
        # judged in the worker itself: a worker waiting on tasks queued behind it would wait for ever
        return self.workers.submit(self.judge_phase, phase, False)

    def judge_phase(self, phase: RolloutPhase, side_by_side: bool = True) -> RolloutPhase:
        """`phase` with its groups judged (`side_by_side`: on the workers, else in this thread): rewards re-read
        from the server, failed groups marked infra."""
        started = time.monotonic() - phase.seconds
        groups: dict[str, list[Trajectory]] = {}
        for t in phase.trajectories:
            groups.setdefault(t.group_id or t.rollout_id, []).append(t)
        judge_all = self.workers.map if side_by_side else map
        verdicts = dict(zip(groups, judge_all(self.judge.judge_group, groups.values()), strict=True))
        judged = collect(self.client, phase.rollouts, started)
        failed = {group for group, ok in verdicts.items() if not ok}
        if not failed:
            return judged
        marked = [
            t.model_copy(update={"failure_kind": FailureKind.INFRA}) if (t.group_id or t.rollout_id) in failed else t
            for t in judged.trajectories
        ]
        return tally(phase.rollouts, marked, time.monotonic() - started)

    def metrics(self) -> dict[str, float]:
        judge = self.judge
        return {"judge/calls": float(judge.caller.calls), "judge/tokens": float(judge.caller.tokens),
                "judge/flagged": float(judge.flagged), "judge/failed_groups": float(judge.failed),
                "judge/cached": float(len(judge.cache))}  # fmt: skip

    def close(self) -> None:
        self.workers.shutdown(wait=False, cancel_futures=True)
        self.judge.caller.close()
