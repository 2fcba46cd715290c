"""`alight eval CONFIG.yaml`: the policy on the validation tasks, no training; prints the baseline report.

An evaluation keeps its store, keys, logs and report.json in a folder of its own (`eval_folder`), so its rollouts
never join a training run's store unless `--into-run` asks; comparing candidates is commands/eval_compare.py's.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from pathlib import Path
from typing import Any

import typer

from alight.commands.exits import exit_with
from alight_server.commands.options import AdminKeyOption, DbOption, RunDirOption, SettingsOption
from alight_server.commands.train import parse_settings, train_extra_missing, training_config, with_checkpoint


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def evaluate(
        config: Path | None = typer.Argument(
            None, help="Training config (YAML): its model, agent and validation tasks; in a comparison the baseline."
        ),
        settings: SettingsOption = None,
        against: list[Path] | None = typer.Option(
            None,
            "--against",
            help="A candidate to compare with the baseline: another config (YAML) or a saved report.json. Repeatable.",
        ),
        variants: list[str] | None = typer.Option(
            None,
            "--variant",
            help="A candidate: CONFIG with one --set style override, [NAME:]KEY=VALUE (e.g. "
            "'short:agent.env.PROMPT=Be brief.'); repeat a NAME to give one candidate several. Repeatable.",
        ),
        checkpoints: list[Path] | None = typer.Option(
            None,
            "--checkpoint",
            help="A candidate: CONFIG with the policy of a run's checkpoint (a run folder or "
            "its step-N folder). Repeatable.",
        ),
        baseline: Path | None = typer.Option(
            None, "--baseline", help="A saved report.json as the baseline (else CONFIG, or the first candidate)."
        ),
        junit: Path | None = typer.Option(
            None, "--junit", help="In a comparison: also write a JUnit XML report (a failed case per metric worse)."
        ),
        markdown: Path | None = typer.Option(
            None, "--markdown", help="In a comparison: also write a Markdown summary (the verdict and the tables)."
        ),
        out: Path | None = typer.Option(
            None, "--out", help="Also write the report (a comparison: comparison.json) here."
        ),
        name: str | None = typer.Option(
            None, "--name", help="The evaluation's name: its folder is OUTPUT_DIR/eval/NAME (default CONFIG-TIMESTAMP)."
        ),
        output_dir: Path | None = typer.Option(
            None,
            "--output-dir",
            help="The evaluation's folder (its store, logs, report.json) instead of OUTPUT_DIR/eval/NAME.",
        ),
        into_run: bool = typer.Option(
            False, "--into-run", help="Write the rollouts into the training run's own folder and store (output_dir)."
        ),
        traces: str | None = typer.Option(
            None, "--traces", help="An imported run (alight data import): score its trajectories, run no agent."
        ),
        benchmark: str | None = typer.Option(
            None,
            "--benchmark",
            help="A public benchmark, NAME:CATEGORY[,CATEGORY] (e.g. bfcl:simple): its own tasks "
            "and checker on CONFIG's policy instead of the validation tasks (docs/environments.md).",
        ),
        limit: int | None = typer.Option(
            None, "--limit", min=1, help="With --benchmark: each category's first N tasks."
        ),
        db: DbOption = None,
        admin_key: AdminKeyOption = None,
        run_dir: RunDirOption = None,
    ) -> None:
        """Run the validation tasks once each (validation.samples_per_task times) and print the baseline:
        success (reward >= 1) and mean reward, each ± 2 SE (a 95% interval, clustered by task), tool errors,
        tokens, latency, retries, gate violations by rule. Writes to OUTPUT_DIR/eval/NAME, not the run's store.

        With candidates (--against, --variant, --checkpoint, --baseline) it runs each on the same tasks and prints
        each one's paired difference from the baseline per metric, ± 2 SE, with a verdict: better, worse or within
        noise; comparison.json and comparison.png go in the evaluation folder. A comparison exits 0 improved,
        3 no change, 4 worse, 5 safety regression (gate violations or review flags worse), 1 infrastructure
        failure, 2 usage (docs/training.md, "Comparing candidates")."""
        from alight_server.redaction.redactor import redact_for_people

        if benchmark is not None:
            return _benchmark(config, settings, benchmark, limit, name, output_dir)
        if against or variants or checkpoints or baseline is not None:
            if into_run or traces is not None:
                raise exit_with(
                    "alight eval: a comparison runs in its own folder: leave out --into-run and --traces", 2
                )
            code = _compare(config, settings, against or [], variants or [], checkpoints or [], baseline, name,
                            output_dir, (out, junit, markdown))  # fmt: skip
            raise typer.Exit(code)
        if config is None:
            raise exit_with("alight eval: name a CONFIG (or --baseline and --against reports to compare)", 2)

        train_config = training_config(config, parse_settings(settings), "alight eval")
        try:
            from alight_server.evaluation.policy import run_eval
        except ImportError as exc:
            raise train_extra_missing(exc, "alight eval") from exc
        folder = eval_folder(train_config, config, name, output_dir, into_run) if traces is None else None
        try:
            if traces is not None:
                report = _score_traces(train_config, traces, db, admin_key, run_dir)
            else:
                assert folder is not None
                report = run_eval(train_config, folder)
        except (RuntimeError, ValueError, FileNotFoundError) as exc:
            raise exit_with(redact_for_people(f"alight eval: {exc}")) from exc
        typer.echo(redact_for_people("\n".join(report.lines())))  # for people: nothing captured shows in the clear
        for path in (p for p in (out, folder and folder / "report.json") if p is not None):
            path.write_text(json.dumps(report.as_dict(), indent=2))
        if folder is not None:
            typer.echo(f"evaluation folder: {folder} (its store alight.db, logs/, report.json)")


def _compare(
    config: Path | None,
    settings: list[str] | None,
    against: list[Path],
    variants: list[str],
    checkpoints: list[Path],
    baseline: Path | None,
    name: str | None,
    output_dir: Path | None,
    files: tuple[Path | None, Path | None, Path | None],
) -> int:
    """Run each candidate that is a config in a subfolder of the evaluation folder, then print and write each
    one's comparison with the baseline; the exit status (commands/eval_compare.py `exit_status`)."""
    from alight_server.commands.eval_compare import (
        COMPARISON_JSON,
        candidates,
        comparisons_of,
        exit_status,
        write_comparison,
        write_junit,
        write_markdown,
    )

    first, runs = candidates(config, against, variants, checkpoints, baseline, parse_settings)
    shared = parse_settings(settings)  # every config candidate read (and refused) before the first one runs
    configs = {
        c.name: training_config(c.config_path, {**shared, **c.overrides}, "alight eval", f"{c.name}: ")
        for c in [first, *runs]
        if c.config_path is not None
    }
    if (main := next(iter(configs.values()), None)) is not None:
        assert config is not None or against
        folder = eval_folder(main, config or against[0], name, output_dir, False)
    else:  # saved reports only: nothing runs, the comparison goes in --output-dir or ./eval/NAME
        folder = (output_dir or Path("eval") / (name or f"compare-{time.strftime('%Y%m%d-%H%M%S')}")).resolve()
    reports = _candidate_reports([first, *runs], configs, folder)
    try:
        comparisons = comparisons_of(first, reports)
    except ValueError as exc:
        raise exit_with(f"alight eval: {exc}", 2) from exc
    for comparison in comparisons:
        typer.echo("\n".join(comparison.lines()))
    write_comparison(folder, first, runs, comparisons)
    code, verdict = exit_status(comparisons, reports)
    out, junit, markdown = files
    if out is not None:
        out.write_text((folder / COMPARISON_JSON).read_text())
    if junit is not None:
        write_junit(junit, comparisons)
    if markdown is not None:
        write_markdown(markdown, comparisons, verdict)
    typer.echo(f"comparison: {folder / COMPARISON_JSON} and {folder / 'comparison.png'}")
    typer.echo(verdict)
    return code


def _candidate_reports(candidates: list[Any], configs: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Each candidate's report: a saved one as read, a config's run in `folder/NAME` (report.json there), printed."""
    from alight_server.redaction.redactor import redact_for_people

    reports: dict[str, Any] = {}
    for candidate in candidates:
        if candidate.report is not None:
            reports[candidate.name] = candidate.report
            continue
        train_config = configs[candidate.name]
        where = folder / candidate.name
        if candidate.checkpoint is not None:
            train_config = with_checkpoint(train_config, candidate.checkpoint, where, "alight eval: --checkpoint")
        from alight_server.evaluation.policy import run_eval  # the stack's modules: only when something runs

        try:
            report = run_eval(train_config, where)
        except (RuntimeError, ValueError, FileNotFoundError) as exc:
            raise exit_with(redact_for_people(f"alight eval: {candidate.name}: {exc}")) from exc
        (where / "report.json").write_text(json.dumps(report.as_dict(), indent=2))
        reports[candidate.name] = report
        typer.echo(redact_for_people("\n".join(report.lines(candidate.name))))
    return reports


def eval_folder(config: Any, config_path: Path, name: str | None, output_dir: Path | None, into_run: bool) -> Path:
    """Where an evaluation writes: `--output-dir`, else with `--into-run` the run's own output_dir, else
    OUTPUT_DIR/eval/NAME (NAME: `--name`, else the config file's name and the time, e.g. `quickstart-20261206-1624`)."""
    if into_run and output_dir is not None:
        raise exit_with("alight eval: --into-run writes into the run's output_dir; leave out --output-dir", 2)
    if output_dir is not None:
        return output_dir.resolve()
    if into_run:
        return Path(config.output_dir)
    name = name or f"{config_path.stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise exit_with(f"alight eval: --name {name!r} must be one folder name (letters, digits, '.', '_', '-')", 2)
    return Path(config.output_dir) / "eval" / name


def _score_traces(config: Any, run_id: str, db: str | None, admin_key: str | None, run_dir: Path | None) -> Any:
    """The config's evaluator over an imported run's trajectories (evaluation/traces.py)."""
    from alight_server.commands.data_import import open_cli_store
    from alight_server.evaluation.evaluators import load_evaluator
    from alight_server.evaluation.traces import evaluate_traces

    if config.evaluator is None:
        raise ValueError("--traces scores imported trajectories with the config's evaluator: set `evaluator:` in it")
    with contextlib.closing(open_cli_store(db, admin_key, run_dir)) as store:
        return evaluate_traces(store, run_id, load_evaluator(config.evaluator))


def _benchmark(config: Path | None, settings: list[str] | None, spec: str, limit: int | None, name: str | None,
               output_dir: Path | None) -> None:  # fmt: skip
    """`--benchmark`: the benchmark's tasks on CONFIG's policy; prints its score and table, writes report.json."""
    from alight_server.evaluation.benchmark import load_benchmark, run_benchmark
    from alight_server.redaction.redactor import redact_for_people

    if config is None:
        raise exit_with("alight eval --benchmark: name the CONFIG whose policy answers (its model and inference)", 2)
    train_config = training_config(config, parse_settings(settings), "alight eval", "alight eval: ")
    try:
        load_benchmark(spec)  # a wrong name fails before any model loads
    except (ValueError, RuntimeError) as exc:
        raise exit_with(f"alight eval: {exc}", 2) from exc
    folder = eval_folder(train_config, config, name or f"{spec.replace(':', '-').replace(',', '_')}-"
                         f"{time.strftime('%Y%m%d-%H%M%S')}", output_dir, False)  # fmt: skip
    try:
        report = run_benchmark(train_config, spec, limit, folder)
    except (RuntimeError, ValueError, FileNotFoundError) as exc:  # a checker's error may quote an answer
        raise exit_with(redact_for_people(f"alight eval: {exc}")) from exc
    typer.echo("\n".join(report.lines()))
    (folder / "report.json").write_text(json.dumps(report.as_dict(), indent=2))
    typer.echo(f"evaluation folder: {folder} (its store alight.db, logs/, report.json)")
