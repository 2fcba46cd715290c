"""How well a judged run's judge agreed with the verifiable reward it never saw, from the run's store.

    .venv/bin/python examples/reasoning_gym/judge_agreement.py runs/reasoning_gym_judge

For each judged training rollout: the judge's score (the reward named `judge`) and the evaluator's final reward
(reasoning-gym's score_answer, recorded, not trained on under `judge.replace`). Prints per step and overall the
rollouts judged, the mean judge score of the rollouts the evaluator scored 1 and of those it scored 0 (± 2 SE),
the Pearson correlation, and how often the judge ranked a right rollout above a wrong one (the AUC, ties half).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
from collections import defaultdict
from pathlib import Path


def mean_2se(values: list[float]) -> str:
    if not values:
        return "-"
    two_se = 2 * statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else float("nan")
    return f"{statistics.mean(values):.3f} ± {two_se:.3f} (n {len(values)})"


def agreement(pairs: list[tuple[float, float]]) -> str:
    """`pairs` of (judge score, verifiable reward): the two means, Pearson's r and the AUC."""
    right = [j for j, v in pairs if v >= 1]
    wrong = [j for j, v in pairs if v < 1]
    judge, verifiable = [j for j, _ in pairs], [v for _, v in pairs]
    try:
        r = f"{statistics.correlation(judge, verifiable):+.3f}"
    except statistics.StatisticsError:  # fewer than 2 rollouts, or one side constant
        r = "-"
    wins = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in right for b in wrong)
    auc = f"{wins / (len(right) * len(wrong)):.3f}" if right and wrong else "-"
    return f"judge score | right {mean_2se(right)} | wrong {mean_2se(wrong)} | r {r} | AUC {auc}"


def main() -> None:
    parser = argparse.ArgumentParser(description="a judged run's judge scores against its verifiable reward")
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args()
    db = sqlite3.connect(f"file:{args.run_dir / 'alight.db'}?mode=ro", uri=True)
    rows = db.execute(
        "select r.rollout_id, r.name, r.source, r.value, o.policy_version from rewards r "
        "join rollouts o on o.id = r.rollout_id where o.mode = 'train' and r.final and "
        "((r.source = 'judge' and r.name = 'judge') or (r.source = 'evaluator' and r.name is null))"
    ).fetchall()
    found: dict[str, dict[str, float]] = defaultdict(dict)
    version: dict[str, int] = {}
    for rollout, _, source, value, policy_version in rows:
        found[rollout][source] = value
        version[rollout] = policy_version
    by_version: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for rollout, got in found.items():
        if "judge" in got and "evaluator" in got:
            by_version[version[rollout]].append((got["judge"], got["evaluator"]))
    unjudged = sum("judge" not in got for got in found.values())
    for v in sorted(by_version):
        print(f"policy version {v}: {len(by_version[v])} rollouts, {agreement(by_version[v])}")
    everything = [p for pairs in by_version.values() for p in pairs]
    print(f"all: {len(everything)} rollouts ({unjudged} with no judge score), {agreement(everything)}")


if __name__ == "__main__":
    main()
