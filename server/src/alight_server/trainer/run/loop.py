"""The training loop: rollouts in groups, samples, one RL step, weight sync, validation, checkpoints.

A step's parts are in docs/training.md and trainer/run/train_step.py. Validation runs before training, every
`validation.every` steps and at the end; each checkpoint is one that `--resume` continues from."""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import torch

from alight.client import AlightClient
from alight_server.inference.models import resolve_model
from alight_server.trainer.backends.base import TrainerBackend
from alight_server.trainer.backends.policy_set import PolicySet, make_policy_set
from alight_server.trainer.config.run import TrainConfig
from alight_server.trainer.report.display import RunDisplay
from alight_server.trainer.report.metrics import MetricsLog
from alight_server.trainer.report.server import RunReporter
from alight_server.trainer.report.summary import RunResult, finish_run
from alight_server.trainer.run.async_pool import GroupPool
from alight_server.trainer.run.checkpoint import latest_checkpoint, load_checkpoint, restore_rng, save_checkpoint
from alight_server.trainer.run.dataset import TaskCursor, load_splits
from alight_server.trainer.run.judging import Judging
from alight_server.trainer.run.phases import RunPhases, val_task_count
from alight_server.trainer.run.quarantine import Quarantine
from alight_server.trainer.run.rollout_source import ImportedTraces, PoolGroups, RolloutSource, StepGroups
from alight_server.trainer.run.servers import RunStack, StackOpener
from alight_server.trainer.run.train_step import Started, torch_threads, train_step
from alight_server.trainer.run.weight_sync import WeightSync

log = logging.getLogger("alight.trainer")


class TrainingRun:
    """One `alight train`. `train_tasks` / `val_tasks` (lists or `datasets.Dataset`) override the files."""

    def __init__(
        self,
        config: TrainConfig,
        *,
        stacks: StackOpener,
        resume: bool = False,
        train_tasks: Any = None,
        val_tasks: Any = None,
        show_progress: bool = True,
    ) -> None:
        self.config = config
        self.stacks = stacks  # the servers it runs against (stacks/opening.py for `alight train`)
        self.resume = resume
        self.run_dir = Path(config.output_dir)
        self.splits = load_splits(config.dataset, config.seed, train_tasks, val_tasks)
        self.cursor = TaskCursor(self.splits.train, config.seed)
        self.history: list[dict[str, Any]] = []
        self.step = 0
        self.show_progress = show_progress
        self.policy_version = 0
        self.judging: Judging | None = None  # `judge:`

    def _run_id(self) -> str:
        path = self.run_dir / "run.json"
        if path.is_file():
            return json.loads(path.read_text())["run_id"]
        run_id = uuid.uuid4().hex[:8]
        path.write_text(json.dumps({"run_id": run_id, "config": self.config.public_dump()}, indent=2))
        return run_id

    def _restore(self, backend: PolicySet) -> dict[str, Any] | None:
        """Continue from the latest checkpoint with --resume (refuse one without it); the checkpoint's payload."""
        checkpoints = self.config.run_dir_checkpoints()
        found = latest_checkpoint(checkpoints)
        if not self.resume:
            if found is not None:
                raise RuntimeError(
                    f"{self.run_dir} already holds checkpoints (latest {found.name}); pass --resume to continue "
                    "that run, or set output_dir to a new folder"
                )
            return None
        if found is None:
            raise RuntimeError(f"--resume: no checkpoint under {checkpoints}; start without --resume")
        state = load_checkpoint(found, resume=True)
        backend.load_state_dict(state["trainer"])
        self.cursor.restore(state["cursor"])
        self.history = state["history"]
        self.step = int(state["step"])
        restore_rng(state["rng"])
        log.info("resumed from %s at step %d", found, self.step)
        return state

    def _checkpoint(self, live: Started) -> None:
        payload = {"trainer": live.backend.state_dict(), "cursor": self.cursor.state(), "history": self.history}
        payload.update(live.rollouts.checkpoint())
        if live.quarantine is not None:
            payload["quarantine"] = live.quarantine.state()
        checkpoint = self.config.checkpoint
        save_checkpoint(
            self.config.run_dir_checkpoints(), self.step, payload, checkpoint.keep_last, checkpoint.optimizer
        )

    def run(self) -> RunResult:
        # The run's torch threads (inference.torch_threads), given back afterwards: a caller's process keeps its own.
        # The display from the start: a log hears from the run while its servers and weights load too.
        with (
            torch_threads(self.config.inference.torch_threads or None),
            RunDisplay(self.config.steps, enabled=self.show_progress) as display,
        ):
            return self._run(display)

    def _run(self, display: RunDisplay) -> RunResult:
        from transformers import AutoTokenizer

        cfg = self.config
        display.status("starting the run's servers and loading the policy")
        if int(os.environ.get("RANK", "0")) > 0:
            raise RuntimeError(
                "TrainingRun runs on rank 0 only; on the other ranks of a torchrun launch call "
                "alight_server.trainer.backends.base.follow_rank(config) (`alight train` does this by itself)"
            )
        self.run_dir.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(cfg.seed)
        self.run_id = self._run_id()
        stack: RunStack | None = None
        backend: PolicySet | None = None
        metrics_log: MetricsLog | None = None
        reporter: RunReporter | None = None
        ok = False
        try:
            stack = self.stacks.open_servers(cfg, self.run_dir)
            # self.backend (the trainer backend; the PolicySet with `policies:`) and self.rollouts stay set after
            # the run, for a caller (a test) to look at.
            backend = make_policy_set(cfg, stack.client if stack is not None else None)
            self.backend: TrainerBackend | PolicySet = backend.one or backend
            tokenizer = AutoTokenizer.from_pretrained(resolve_model(cfg.model))
            restored = self._restore(backend)
            metrics_log = MetricsLog(self.run_dir, cfg.metrics, cfg.public_dump(), resume=self.resume)
            if stack is None:
                stack = self.stacks.open_local(cfg, self.run_dir, self.backend)
            client = stack.client
            assert client is not None, "a started stack has its client"
            phases = RunPhases(client, cfg, self.run_id, self.run_dir, self.splits, self.cursor)
            reporter = RunReporter(client, self.run_id, cfg.public_dump(), cfg.steps).start()
            print(self.stacks.link(stack, self.run_id), file=sys.stderr, flush=True)
            sync = stack.weight_sync()
            self.rollouts = self._rollout_source(client, phases, sync, restored or {})
            # Inference must serve the trainer's weights: after a resume, when it holds an earlier run's, or
            # (several policies) when a policy starts from an `init_from` adapter.
            adapters = backend.starts_from_checkpoints
            if self.step > 0 or stack.serves_other_weights or adapters:
                why = {"resumed_at": self.step} if self.step else {"replaced": "weights of an earlier run"}
                why = {"init_from": "policies' adapters"} if adapters and not self.step else why
                self.policy_version, _ = backend.push_weights(sync, why)
            quarantine = self._quarantine(client, restored or {})
            live = Started(backend, phases, self.rollouts, sync, tokenizer, metrics_log, reporter, quarantine)
            result = self._loop(live, display)
            ok = True
            return result
        finally:
            if reporter is not None:
                reporter.finish(ok)
            if metrics_log is not None:
                metrics_log.close(ok=ok)
            if stack is not None:
                stack.close()
            else:
                self.stacks.abandon()
            for closing in (backend, self.judging):
                if closing is not None:
                    closing.close()

    def _rollout_source(
        self, client: AlightClient, phases: RunPhases, sync: WeightSync, restored: dict[str, Any]
    ) -> RolloutSource:
        """Each step's own groups; with `async_rollout.enabled`, the groups in flight; with `traces.run`, the
        imported trajectories (each as a checkpoint left it)."""
        cfg = self.config
        if cfg.traces.run is not None:
            traces = ImportedTraces(
                client, cfg.traces.run, cfg.traces.per_step or cfg.tasks_per_step * cfg.group_size, cfg.seed
            )
            if "traces_cursor" in restored:
                traces.restore(restored["traces_cursor"])
            return traces
        self.judging = Judging.from_config(cfg, client)
        if not cfg.async_rollout.enabled:
            return StepGroups(phases, self.judging)
        sync.allow_late_calls(cfg.async_rollout.drain_timeout_s)
        pool = GroupPool(client, cfg, self.run_id, self.cursor, {"run_dir": str(self.run_dir)}, judging=self.judging)
        if "async_pool" in restored:
            pool.restore(restored["async_pool"])
        return PoolGroups(pool)

    def _quarantine(self, client: AlightClient, restored: dict[str, Any]) -> Quarantine | None:
        """The review queue's side of the run (`review:`); None with `traces.run` (imported, nothing sampled)."""
        if self.config.traces.run is not None:
            return None
        quarantine = Quarantine(client, self.config, self.run_dir)
        if "quarantine" in restored:
            quarantine.restore(restored["quarantine"])
        return quarantine

    def _loop(self, live: Started, display: RunDisplay) -> RunResult:
        cfg, phases = self.config, live.phases
        every = cfg.validation.every
        overlapped_s = 0.0  # the first validation's time, which step 1's rollouts ran alongside
        display.status("starting", completed=self.step)
        if self.step == 0 and not any("val/score" in r for r in self.history):
            val = phases.start_validation(self.step)
            # The first step's rollouts are served by the same weights as this validation: created right
            # behind it, they keep the engine's batch full through the validation's tail instead of
            # starting after it (their time/rollouts_s counts from here, and the step's line says so).
            ahead = val is not None and cfg.steps > 0 and live.rollouts.start_ahead(self.step)
            before = phases.validate(display, self.step, val, last=cfg.steps == 0)
            overlapped_s = before.get("time/val_s", 0.0) if ahead else 0.0
            display.val_line(0, before)
            self._record(live, 0, before)
        while self.step < cfg.steps:
            metrics, self.policy_version = train_step(live, cfg, self.step, self.policy_version, display)
            self.step += 1
            if overlapped_s:
                metrics["time/overlapped_val_s"], overlapped_s = overlapped_s, 0.0
            if "train/reward_mean" in metrics:
                display.step_line(self.step, metrics)  # when the update ends, not after the next validation
            if (every and self.step % every == 0) or self.step == cfg.steps:
                display.status(f"validation after step {self.step}: starting")
                validation = phases.validate(display, self.step, last=self.step == cfg.steps)
                display.val_line(self.step, validation)
                metrics.update(validation)
            stop = self._safety_rule(phases, metrics, display)
            self._record(live, self.step, metrics)
            display.status(f"step {self.step} checkpoint", completed=self.step)
            ck = cfg.checkpoint.every
            if (ck and self.step % ck == 0) or self.step == cfg.steps or stop:
                self._checkpoint(live)
            if stop:
                break
        display.status("done", completed=self.step)
        display.close()  # the bar's last state, then the summary under it
        return finish_run(
            self.history, self.run_dir, self.config.model, self.step, self.policy_version,
            val_task_count(self.config, self.splits), display, live.metrics_log,
        )  # fmt: skip

    def _safety_rule(self, phases: RunPhases, metrics: dict[str, float], display: RunDisplay) -> bool:
        """`regression.safety_rule`: on an alarm (trainer/run/regression_suite.py) a line and
        `regression/safety_alarm` 1; True when the rule is `stop` (the run checkpoints and ends at this step)."""
        alarm = phases.suite.alarm(metrics, self.history) if phases.suite is not None else None
        if alarm is None:
            return False
        stop = self.config.regression.safety_rule == "stop"
        metrics["regression/safety_alarm"] = 1.0
        metrics["regression/safety_stop"] = float(stop)
        line = f"{alarm}: {'stopping the run' if stop else 'warning'} (regression.safety_rule: {self.config.regression.safety_rule})"
        log.warning(line)
        display.line(f"[red]{line}[/]")
        return stop

    def _record(self, live: Started, step: int, metrics: dict[str, float]) -> None:
        if not metrics:
            return
        clean = {k: v for k, v in metrics.items() if not (isinstance(v, float) and math.isnan(v))}
        self.history.append({"step": step, **clean})
        live.metrics_log.log(step, clean)
        live.reporter.step(step, clean)
