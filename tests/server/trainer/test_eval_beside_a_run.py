"""What `alight train` and `alight eval` print and write, run as a user runs them: the before/after table and the
evaluation reports under it print the same intervals, and an evaluation beside the run keeps to its own folder."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

import pytest
from gated_run import GatedRun
from typer.testing import CliRunner

from alight.api_models import RolloutQuery
from alight.cli import app as cli
from alight_server.commands.eval_compare import candidates
from alight_server.commands.train import gate, parse_settings
from alight_server.stacks.run_store import open_run_store
from alight_server.ui import summaries

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def alight(*args: str) -> str:
    """The `alight` command's stdout, run in this process: the same command, options and code as the installed
    `alight`, without an interpreter start and a torch import per evaluation. What these evaluations prove is where
    they write and what they compare, not how a process starts (the train run is a real process, gated_run.py;
    `alight eval` as one, into pipes, with its exit status: test_eval_compare)."""
    done = CliRunner().invoke(cli, list(args))
    assert done.exit_code == 0, done.output[-8000:]
    return done.stdout


@pytest.fixture(scope="module")
def trained(gated_run: GatedRun) -> tuple[Path, str]:
    """The session's gated run (gated_run.py: one step of the tiny model, 3 held-out tasks x 2 samples,
    `--gate` with JUnit XML and a Markdown summary in the config's folder, exit 3): its config file and what it
    printed."""
    return gated_run.config, gated_run.stdout


def cells(text: str, row: str) -> list[str]:
    """The before and after cells of the before/after table's row that starts with `row`."""
    (line,) = [line for line in text.splitlines() if f"│ {row}" in line]
    return [cell.strip() for cell in line.split("│")[2:4]]


def reported(text: str, title: str, metric: str) -> str:
    """The value a report (`title: ...` and its indented lines) prints for `metric`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{title}:"))
    (line,) = [line for line in lines[start + 1 : start + 10] if line.startswith(f"  {metric} ")]
    return line.removeprefix(f"  {metric} ").strip()


def test_the_table_and_the_reports_under_it_print_the_same_intervals(trained: tuple[Path, str]) -> None:
    _, text = trained
    assert "before / after (± 2 SE: 95% interval, clustered by task)" in text, text
    for row, metric in (("validation mean reward (3 held-out tasks)", "mean reward"),
                        ("validation success (reward ≥ 1)", "success (reward ≥ 1)")):  # fmt: skip
        before, after = cells(text, row)
        assert " ± " in before and " ± " in after, text  # three tasks of different rewards: a real interval
        assert reported(text, "before training", metric) == before, text
        assert reported(text, "after training (step 1)", metric) == after, text
    # apple 1.0, kiwi 0.5, fig 0.0, each twice: mean 0.5, success 1/3 (rewards come from the evaluator alone)
    assert cells(text, "validation mean reward")[0].startswith("0.500 ± "), text
    assert cells(text, "validation success")[0].startswith("0.333 ± "), text


def test_train_s_validation_reports_cost_each_success_at_the_run_s_prices(trained: tuple[Path, str]) -> None:
    _, text = trained
    # read back from the run's store and its run.json's prices: (validation_reports), each report's cost in USD
    for title in ("before training", "after training (step 1)"):
        # priced in USD, not "(no prices: in the config)"; the amount follows the seconds the machine took
        assert re.search(r"sandbox-s, \$\d+\.\d+$", reported(text, title, "cost")), text
    per_success = [line for line in text.splitlines() if line.startswith("  per success ")]
    assert len(per_success) >= 2 and all("(2 of 6 rollouts succeeded)" in line for line in per_success[:2]), text


def test_train_compares_its_last_validation_with_its_first_paired_by_task(trained: tuple[Path, str]) -> None:
    config, text = trained
    title = "after training (step 1) vs before training: 3 tasks paired (difference ± 2 SE"
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows = {line[2:29].strip(): line for line in lines[start + 2 : start + 9]}
    # the evaluator scores by word alone: the same tasks score the same before and after, 0 ± 0 within noise
    for label in ("success (reward ≥ 1)", "mean reward"):
        assert rows[label].endswith("+0.000 ± 0.000     within noise"), text
    # the table's gain line carries the same paired interval (unpaired it would be ± 0.5 here, not ± 0)
    assert (
        "validation gain in mean reward: +0.000 ± 0.000 (± 2 SE: 95% interval, clustered by task, paired by task)"
        in text
    )
    document = json.loads((config.parent / "run" / "comparison.json").read_text())
    (comparison,) = document["comparisons"]
    assert (comparison["baseline"], comparison["tasks"]) == ("before training", 3), comparison
    assert (config.parent / "run" / "comparison.png").is_file()


def test_train_gates_on_its_verdict_as_eval_does(trained: tuple[Path, str]) -> None:
    config, text = trained
    verdict = "verdict: no change (exit 3; after training (step 1) no change)"
    assert text.rstrip().endswith(verdict), text  # the fixture saw the exit status: 3
    markdown = (config.parent / "train.md").read_text()
    assert markdown.startswith(f"## alight train {verdict}"), markdown
    assert "| success (reward ≥ 1) | 0.333 | 0.333 | +0.000 ± 0.000 | within noise |" in markdown, markdown
    suites = ElementTree.parse(config.parent / "train.xml").getroot()
    (suite,) = suites
    assert (suites.get("name"), suite.get("name")) == ("alight train", "after training (step 1) vs before training")
    cases = {case.get("name"): case for case in suite}
    assert {"success", "reward", "gate_violations"} <= set(cases), cases
    assert suite.get("failures") == "0" and not any(case.find("failure") is not None for case in suite)


def test_a_run_the_gate_cannot_judge_fails_it(tmp_path: Path) -> None:
    # one validation (steps: 0, or validation off after it): nothing to compare, so no pass: exit 1
    why = "the run validated once: no validation after training to compare"
    code, verdict = gate((None, {}, why), tmp_path / "t.xml", tmp_path / "t.md")
    assert (code, verdict) == (1, f"verdict: infrastructure failure (exit 1; {why})")
    assert (tmp_path / "t.md").read_text().startswith(f"## alight train {verdict}")
    root = ElementTree.parse(tmp_path / "t.xml").getroot()
    assert (root.tag, root.get("name"), len(root)) == ("testsuites", "alight train", 0)


def test_a_checkpoint_without_a_saved_baseline_is_a_candidate_beside_config(tmp_path: Path) -> None:
    # which candidates `alight eval CONFIG --checkpoint RUN` runs: CONFIG first (the baseline), then the checkpoint;
    # that every config candidate runs in a folder of its own is test_eval_compare's (three candidates in one eval)
    (tmp_path / "run").mkdir()
    first, runs = candidates(tmp_path / "config.yaml", [], [], [tmp_path / "run"], None, parse_settings)
    assert (first.name, first.config_path, first.checkpoint) == ("config", tmp_path / "config.yaml", None)
    assert [(c.name, c.config_path, c.checkpoint) for c in runs] == [
        ("checkpoint-run", tmp_path / "config.yaml", (tmp_path / "run").resolve())
    ]


def test_a_checkpoint_is_a_candidate_against_the_base_policys_saved_report(
    trained: tuple[Path, str], evaluated: Evaluated
) -> None:
    config, _ = trained
    run = config.parent / "run"
    # against the base policy's saved report (a pilot's recorded baseline: the evaluation beside the run) the
    # checkpoint runs alone: CONFIG is not run again as a candidate of its own; --output-dir puts the whole
    # evaluation outside the run's folder
    saved = evaluated.folder / "report.json"
    elsewhere = config.parent / "elsewhere"
    before = snapshot(run)
    done = CliRunner().invoke(cli, ["eval", str(config), "--baseline", str(saved), "--checkpoint", str(run),
                                    "--output-dir", str(elsewhere)])  # fmt: skip
    # the evaluator scores by word alone, so the trained policy scores as the base one: no change, exit 3
    assert done.exit_code == 3, done.output[-8000:]
    assert "verdict: no change (exit 3; checkpoint-run no change)" in done.stdout, done.stdout
    document = json.loads((elsewhere / "comparison.json").read_text())
    assert document["baseline"]["source"] == str(saved), document
    assert [c["name"] for c in document["candidates"]] == ["checkpoint-run"], document
    assert document["candidates"][0]["checkpoint"] == str(run.resolve()), document
    assert document["comparisons"][0]["tasks"] == 3
    assert sorted(p.name for p in elsewhere.iterdir() if p.is_dir()) == ["checkpoint-run"], "CONFIG ran again"
    candidate = elsewhere / "checkpoint-run"
    assert (candidate / "init-policy" / "config.json").is_file()  # the checkpoint's policy ran
    assert (candidate / "report.json").is_file(), "--output-dir: the report is not in the folder it names"
    assert len(rollout_ids(candidate)) == 6, "--output-dir: the rollouts are not in the folder it names"
    assert snapshot(run) == before, "--output-dir: the run's own folder changed"


def test_the_dashboards_validation_band_is_the_tables_interval(trained: tuple[Path, str]) -> None:
    config, text = trained
    store = open_run_store(config.parent / "run")
    try:
        (run,) = store.list_runs()
        bands = summaries.validation_intervals(store, run.id)
    finally:
        store.close()
    shown = [f"{v['mean']:.3f} ± {v['high'] - v['mean']:.3f}" for v in bands]
    assert shown == cells(text, "validation mean reward"), (bands, text)


def snapshot(folder: Path) -> dict[str, str]:
    """Each file under `folder` but its eval/ folder, by its bytes' hash."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.relative_to(folder).parts[0] != "eval"
    }


def rollout_ids(folder: Path) -> set[str]:
    store = open_run_store(folder)
    try:
        return {r.id for r in store.list_rollouts(RolloutQuery(limit=1000))}
    finally:
        store.close()


@dataclass
class Evaluated:
    """`alight eval CONFIG --name baseline` beside the trained run: its folder, what it printed, and the run's
    files and rollout ids just before it ran."""

    folder: Path
    text: str
    run_before: dict[str, str]
    ids_before: set[str]
    run_after: dict[str, str]


@pytest.fixture(scope="module")
def evaluated(trained: tuple[Path, str]) -> Evaluated:
    """One evaluation of the base policy beside the run; its report is also the saved baseline a checkpoint is
    compared with (test_a_checkpoint_is_a_candidate_against_the_base_policys_saved_report)."""
    config, _ = trained
    run = config.parent / "run"
    before, ids = snapshot(run), rollout_ids(run)
    text = alight("eval", str(config), "--name", "baseline")
    return Evaluated(run / "eval" / "baseline", text, before, ids, snapshot(run))


def test_an_evaluation_writes_its_own_folder_and_leaves_the_runs_store_alone(evaluated: Evaluated) -> None:
    assert evaluated.run_after == evaluated.run_before  # not one byte of the run's store, logs or checkpoints changed
    assert f"evaluation folder: {evaluated.folder}" in evaluated.text, evaluated.text
    report = json.loads((evaluated.folder / "report.json").read_text())
    assert (report["rollouts"], report["tasks"], report["mean_reward"]) == (6, 3, 0.5), report
    ids = rollout_ids(evaluated.folder)
    assert len(ids) == 6 and all(i.startswith("eval-") for i in ids), ids
    assert not ids & evaluated.ids_before
    # --output-dir (an evaluation outside the run's folder): test_a_checkpoint_is_a_candidate_against_the_base_...


def test_into_run_is_the_one_way_an_evaluation_joins_the_runs_store(trained: tuple[Path, str]) -> None:
    config, _ = trained
    run = config.parent / "run"
    ids = rollout_ids(run)
    alight("eval", str(config), "--into-run")
    joined = rollout_ids(run) - ids
    assert len(joined) == 6 and all(i.startswith("eval-") for i in joined), joined
    # the run's own reports still read its validations alone: the eval's rollouts are not "before training"
    from alight_server.evaluation.policy import validation_reports

    reports = validation_reports(run)
    assert sorted(reports) == [0, 1] and reports[0].rollouts == 6, reports
