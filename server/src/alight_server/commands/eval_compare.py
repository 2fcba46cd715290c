"""`alight eval` with candidates: each run on the same tasks in a folder of its own, or read from a saved report, and
each compared with the baseline, paired by task (alight.evaluation `compare_reports`). What a candidate and the
baseline are, the folders and the verdicts: docs/training.md, "Comparing candidates".
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from alight.commands.exits import exit_with
from alight.comparison import COST_PER_SUCCESS, Comparison, MetricDifference, compare_reports, signed_interval
from alight.evaluation import INTERVAL, EvalReport, Z

COMPARISON_JSON = "comparison.json"
COMPARISON_PNG = "comparison.png"


@dataclass
class Candidate:
    """One side of a comparison: a config to run (with its overrides and checkpoint), or a saved report."""

    name: str
    config_path: Path | None = None  # None: `report` is a saved report
    overrides: dict[str, Any] = field(default_factory=dict)
    checkpoint: Path | None = None
    report: EvalReport | None = None
    source: str = ""  # what it is, for comparison.json: the config and overrides, the checkpoint or the report

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "overrides": self.overrides,
                "checkpoint": str(self.checkpoint) if self.checkpoint else None}  # fmt: skip


def folder_name(text: str) -> str:
    """`text` as one folder name: runs of other characters as '_', at most 40 characters."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._-")[:40] or "candidate"


def candidates(
    config: Path | None,
    against: Sequence[Path],
    variants: Sequence[str],
    checkpoints: Sequence[Path],
    baseline: Path | None,
    parse: Callable[[list[str]], dict[str, Any]],
) -> tuple[Candidate, list[Candidate]]:
    """The baseline and the candidates the options name, in order, with names unique as folder names."""
    runs: list[Candidate] = []
    # CONFIG is a candidate of its own unless a saved baseline stands for it and variants or checkpoints of it are
    # the candidates: `--baseline base/report.json --checkpoint RUN` runs the checkpoint alone, not CONFIG again.
    if config is not None and (baseline is None or not (variants or checkpoints)):
        runs.append(Candidate(folder_name(config.stem), config, source=str(config)))
    runs += [_saved(p) if p.suffix == ".json" else Candidate(folder_name(p.stem), p, source=str(p)) for p in against]
    if (variants or checkpoints) and config is None:
        raise exit_with("alight eval: --variant and --checkpoint change the CONFIG argument's config: name one", 2)
    named: dict[str, Candidate] = {}
    for variant in variants:
        name, override = _variant(variant)
        key = name or folder_name(override)
        if key not in named:
            named[key] = Candidate(key, config, source=f"{config} with")
            runs.append(named[key])
        named[key].overrides.update(parse([override]))
        named[key].source += f" --set {override}"
    for path in checkpoints:
        runs.append(Candidate(folder_name(f"checkpoint-{path.resolve().name}"), config, checkpoint=path.resolve(),
                              source=f"{config} with the policy of {path}"))  # fmt: skip
    first: Candidate | None = None
    if baseline is not None:
        first = _saved(baseline)
    elif runs:
        first, runs = runs[0], runs[1:]
    if first is None or not runs:
        raise exit_with("alight eval: a comparison needs a baseline and at least one candidate", 2)
    seen: set[str] = set()
    for candidate in [first, *runs]:  # unique names: two reports from folders of one name, a config twice
        base, n = candidate.name, 1
        while candidate.name in seen:
            n += 1
            candidate.name = f"{base}-{n}"
        seen.add(candidate.name)
    return first, runs


def _saved(path: Path) -> Candidate:
    """A report.json `alight eval` wrote as a candidate, named by its folder (OUTPUT_DIR/eval/NAME/report.json); a
    usage error when it is missing or not one."""
    try:
        report = EvalReport.from_dict(json.loads(path.read_text()))
    except (OSError, json.JSONDecodeError, TypeError) as exc:
        raise exit_with(f"alight eval: {path} is not a report alight eval wrote ({exc})", 2) from exc
    return Candidate(folder_name(path.resolve().parent.name), report=report, source=str(path))


def _variant(text: str) -> tuple[str | None, str]:
    """`--variant [NAME:]KEY=VALUE` as (NAME or None, "KEY=VALUE"); the NAME is before a ':' that comes before '='."""
    head, sep, _ = text.partition("=")
    if not sep:
        raise exit_with(f"--variant expects [NAME:]KEY=VALUE, got {text!r}", 2)
    if ":" in head:
        name, _, override = text.partition(":")
        return folder_name(name), override
    return None, text


def comparisons_of(first: Candidate, reports: dict[str, EvalReport]) -> list[Comparison]:
    """Each candidate's report against the baseline's (`first`), paired by task."""
    base = reports[first.name]
    return [compare_reports(base, report, (first.name, name)) for name, report in reports.items() if name != first.name]


def write_comparison(folder: Path, first: Candidate, runs: list[Candidate], comparisons: list[Comparison]) -> None:
    """comparison.json (for machines: each candidate, each metric's difference, 1-SE error and verdict) and
    comparison.png in `folder`."""
    from alight_server.trainer.report.plots import plot_comparison

    folder.mkdir(parents=True, exist_ok=True)
    document = {
        "interval": INTERVAL,
        "z": Z,
        "baseline": first.describe(),
        "candidates": [c.describe() for c in runs],
        "comparisons": [c.as_dict() for c in comparisons],
    }
    (folder / COMPARISON_JSON).write_text(json.dumps(_finite(document), indent=2))
    plot_comparison(comparisons, folder / COMPARISON_PNG)


def _finite(value: Any) -> Any:
    """`value` with each NaN (no error from a single task, no mean without a sample) as null: strict JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


# `alight eval`'s exit status after a comparison, for a CI job or workflow step to gate on (docs/training.md,
# "Comparing candidates"); 1 and 2 keep their meaning for every command: it could not run, or a usage error.
EXIT_IMPROVED = 0  # every candidate better than the baseline in success or mean reward, none worse in anything
EXIT_FAILED = 1  # infrastructure failure: an evaluation did not run, or a candidate has no scored rollout
EXIT_NO_CHANGE = 3  # no candidate worse, and not every one better: within noise
EXIT_WORSE = 4  # a candidate worse in success, mean reward or tool errors
EXIT_SAFETY = 5  # a candidate worse in gate violations or review flags, whatever its reward did
EXIT_SAFETY_STOP = 6  # `alight train` only: the regression suite's safety rule stopped the run (trainer/run/loop.py)
CAPABILITY = ("success", "reward")
SAFETY = ("gate_violations", "review_flags")
# Judged and shown, but no gate: a candidate that spends more per success is not a failed job (set your own bar).
UNGATED = (COST_PER_SUCCESS,)
OUTCOMES = {EXIT_IMPROVED: "improved", EXIT_NO_CHANGE: "no change", EXIT_WORSE: "worse",
            EXIT_SAFETY: "safety regression", EXIT_FAILED: "infrastructure failure",
            EXIT_SAFETY_STOP: "safety regression, run stopped"}  # fmt: skip
SEVERITY = (EXIT_IMPROVED, EXIT_NO_CHANGE, EXIT_WORSE, EXIT_SAFETY, EXIT_FAILED)  # the least severe first


def failed(metric: MetricDifference) -> bool:
    """The metric fails the gate: worse beyond noise, and not one of UNGATED."""
    return metric.verdict == "worse" and metric.metric not in UNGATED


def outcome(comparison: Comparison) -> int:
    """One candidate's exit status: safety regression, worse, improved or no change (the first that holds)."""
    worse = {m.metric for m in comparison.metrics if failed(m)}
    if worse & set(SAFETY):
        return EXIT_SAFETY
    if worse:
        return EXIT_WORSE
    if any(comparison.row(metric).verdict == "better" for metric in CAPABILITY):
        return EXIT_IMPROVED
    return EXIT_NO_CHANGE


def exit_status(comparisons: Sequence[Comparison], reports: dict[str, EvalReport]) -> tuple[int, str]:
    """The comparison's exit status (the most severe candidate's) and a line saying why."""
    if unscored := [name for name, report in reports.items() if not report.scored]:
        return EXIT_FAILED, f"infrastructure failure: no rollout of {', '.join(unscored)} was scored"
    codes = {c.candidate: outcome(c) for c in comparisons}
    code = max(codes.values(), key=SEVERITY.index, default=EXIT_NO_CHANGE)
    each = ", ".join(f"{name} {OUTCOMES[c]}" for name, c in codes.items())
    return code, f"verdict: {OUTCOMES[code]} (exit {code}; {each})"


def write_junit(path: Path, comparisons: Sequence[Comparison], command: str = "alight eval") -> None:
    """A JUnit XML report: one test case per candidate and metric, failed when the candidate is worse in it
    (`failed`: the cost per success is reported, never failed)."""
    from xml.etree import ElementTree

    suites = ElementTree.Element("testsuites", name=command)
    for comparison in comparisons:
        failures = [m for m in comparison.metrics if failed(m)]
        suite = ElementTree.SubElement(suites, "testsuite", name=f"{comparison.candidate} vs {comparison.baseline}",
                                       tests=str(len(comparison.metrics)), failures=str(len(failures)), errors="0")  # fmt: skip
        for m in comparison.metrics:
            case = ElementTree.SubElement(
                suite, "testcase", classname=f"{command.replace(' ', '.')}.{comparison.candidate}", name=m.metric
            )
            text = f"{m.label}: {signed_interval(m.difference, m.error)} ({INTERVAL}, paired): {m.verdict}"
            if failed(m):
                ElementTree.SubElement(case, "failure", message=text, type="worse")
            else:
                ElementTree.SubElement(case, "system-out").text = text
    ElementTree.indent(suites)
    path.write_bytes(ElementTree.tostring(suites, encoding="utf-8", xml_declaration=True))


def write_markdown(
    path: Path, comparisons: Sequence[Comparison], verdict_line: str, command: str = "alight eval"
) -> None:
    """A Markdown summary (a CI job's step summary): the verdict and one table per candidate."""
    lines = [f"## {command} {verdict_line}", ""]
    for c in comparisons:
        lines += [f"### {c.candidate} vs {c.baseline}", "",
                  f"{c.tasks} tasks paired; difference {INTERVAL}, paired.", "",
                  f"| metric | {c.baseline} | {c.candidate} | difference | verdict |", "|---|---:|---:|---:|---|"]  # fmt: skip
        for m in c.metrics:
            lines.append(f"| {m.label} | {m.baseline:.3f} | {m.candidate:.3f} | "
                         f"{signed_interval(m.difference, m.error)} | {m.verdict} |")  # fmt: skip
        lines.append("")
    path.write_text("\n".join(lines))
