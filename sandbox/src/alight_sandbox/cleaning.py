"""Task cleaning before training: drop broken or useless tasks in stages, probe difficulty, split train/val.

Stages, in order (each task is dropped at the first it fails, and the report counts why):
1. `empty_problem_statement`: the statement field is there but holds no text to act on (a task schema without
   that field, such as `{"question": ..., "answer": ...}`, has nothing to check here);
2. `too_many_tests`: FAIL_TO_PASS + PASS_TO_PASS over the limit (slow to grade, rarely a clean task);
3. `quotes_hidden_assertion`: given the hidden tests' sources, the statement quotes an assertion of a
   FAIL_TO_PASS test (alight_sandbox.quoting says what that means), so a policy could special-case it instead of
   fixing the bug; always reported with the evidence, dropped only when asked;
4. `does_not_reproduce`: a checker (the task's own: does the bug show?) says no;
5. difficulty probe (k rollouts of the current policy per task): all solved -> `too_easy`; all failed ->
   kept for a `keep_failed` share of them (the policy may learn them later), else `too_hard`; mixed kept;
   tasks whose probe rollouts all failed for infra reasons -> `probe_failed`.
Then a seeded train/val split.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from alight_sandbox.quoting import hidden_assertions, quoted_assertions

STATEMENT_FIELD = "problem_statement"  # SWE-bench's name, which the coding example's tasks use
MAX_EVIDENCE = 10  # quoted assertions listed per task in the report
Checker = Callable[[dict[str, Any]], bool]
HiddenTests = Callable[[dict[str, Any]], dict[str, str]]  # task -> {path of a test file it hides: its source}
Probe = Callable[[list[dict[str, Any]]], list[list[float | None]]]  # tasks -> k scores each (None: infra)


@dataclass
class CleanReport:
    tasks_in: int = 0
    dropped: dict[str, Counter[str]] = field(default_factory=dict)  # stage -> reason -> count
    probe: dict[str, int] = field(default_factory=dict)  # mixed / all_failed_kept / ...
    quoting: list[dict[str, Any]] = field(default_factory=list)  # {instance_id, dropped, evidence} per task
    train: int = 0
    val: int = 0

    def drop(self, stage: str, reason: str) -> None:
        self.dropped.setdefault(stage, Counter())[reason] += 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "tasks_in": self.tasks_in,
            "dropped": {stage: dict(reasons) for stage, reasons in self.dropped.items()},
            "probe": self.probe,
            "quotes_hidden_assertion": self.quoting,
            "train": self.train,
            "val": self.val,
        }

    def lines(self) -> list[str]:
        out = [f"tasks in: {self.tasks_in}"]
        for stage, reasons in self.dropped.items():
            out += [f"  dropped at {stage}: {n} {reason}" for reason, n in sorted(reasons.items())]
        if self.quoting:
            fate = "dropped" if self.quoting[0]["dropped"] else "kept (--drop-quoting drops them)"
            out.append(f"  statement quotes a hidden assertion: {len(self.quoting)}, {fate}")
            out += [f"    {q['instance_id']}: {q['evidence'][0]}" for q in self.quoting[:5]]
        if self.probe:
            out.append("  probe: " + ", ".join(f"{k} {v}" for k, v in sorted(self.probe.items())))
        out.append(f"kept: {self.train} train, {self.val} val")
        return out


def _empty_statement(task: dict[str, Any], statement_field: str) -> bool:
    return statement_field in task and not str(task[statement_field] or "").strip()


def _quotes(
    task: dict[str, Any], statement_field: str, hidden_tests: HiddenTests | None, drop: bool, report: CleanReport
) -> bool:
    """Does the statement quote a hidden assertion? Each one that does goes in the report with its evidence.

    A task without a statement or FAIL_TO_PASS tests quotes nothing; without `hidden_tests` nothing is checked.
    """
    statement, fail_to_pass = task.get(statement_field), task.get("FAIL_TO_PASS")
    if hidden_tests is None or not isinstance(statement, str) or not fail_to_pass:
        return False
    evidence = quoted_assertions(statement, hidden_assertions(list(fail_to_pass), hidden_tests(task)))[:MAX_EVIDENCE]
    if evidence:
        report.quoting.append({"instance_id": task.get("instance_id"), "dropped": drop, "evidence": evidence})
    return bool(evidence)


def _test_count(task: dict[str, Any]) -> int:
    return len(task.get("FAIL_TO_PASS") or []) + len(task.get("PASS_TO_PASS") or [])


def _probe_stage(
    tasks: list[dict[str, Any]], probe: Probe, keep_failed: float, rng: random.Random, report: CleanReport
) -> list[dict[str, Any]]:
    kept, all_failed = [], []
    for task, scores in zip(tasks, probe(tasks), strict=True):
        real = [s for s in scores if s is not None]
        if not real:
            report.drop("probe", "probe_failed")
        elif all(s >= 1.0 for s in real):
            report.drop("probe", "too_easy")
        elif all(s <= 0.0 for s in real):
            all_failed.append(task)
        else:
            kept.append(task)
    report.probe["mixed"] = len(kept)
    sample = rng.sample(all_failed, round(keep_failed * len(all_failed)))
    report.probe["all_failed_kept"] = len(sample)
    for _ in range(len(all_failed) - len(sample)):
        report.drop("probe", "too_hard")
    chosen = {id(t) for t in kept + sample}
    return [t for t in tasks if id(t) in chosen]


def clean_tasks(
    tasks: Sequence[dict[str, Any]],
    *,
    max_tests: int = 2000,
    statement_field: str = STATEMENT_FIELD,
    hidden_tests: HiddenTests | None = None,
    drop_quoting: bool = False,
    reproduces: Checker | None = None,
    probe: Probe | None = None,
    keep_failed: float = 0.1,
    val_fraction: float = 0.2,
    seed: int = 0,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], CleanReport]:
    """(train, val, report) from `tasks`, each stage in the module docstring applied in order."""
    report = CleanReport(tasks_in=len(tasks))
    rng = random.Random(seed)
    kept = []
    for task in tasks:
        if _empty_statement(task, statement_field):
            report.drop("statement", "empty_problem_statement")
        elif _test_count(task) > max_tests:
            report.drop("size", "too_many_tests")
        elif _quotes(task, statement_field, hidden_tests, drop_quoting, report) and drop_quoting:
            report.drop("quoting", "quotes_hidden_assertion")
        elif reproduces is not None and not reproduces(task):
            report.drop("reproduce", "does_not_reproduce")
        else:
            kept.append(task)
    if probe is not None and kept:
        kept = _probe_stage(kept, probe, keep_failed, rng, report)
    order = list(range(len(kept)))
    rng.shuffle(order)
    n_val = round(val_fraction * len(kept))
    val = [kept[i] for i in sorted(order[:n_val])]
    train = [kept[i] for i in sorted(order[n_val:])]
    report.train, report.val = len(train), len(val)
    return train, val, report
