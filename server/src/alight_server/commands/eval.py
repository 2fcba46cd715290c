"""`alight eval CONFIG.yaml`: the policy on the validation tasks, no training; prints the baseline report.

An evaluation keeps its store, keys, logs and report.json in a folder of its own, OUTPUT_DIR/eval/NAME
(`--output-dir` names another), so its rollouts never join a training run's store unless `--into-run` asks.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import typer

from alight_server.commands.options import AdminKeyOption, DbOption, RunDirOption, SettingsOption
from alight_server.commands.train import parse_settings


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def evaluate(
        config: Path = typer.Argument(..., help="Training config (YAML): its model, agent and validation tasks."),
        settings: SettingsOption = None,
        out: Path | None = typer.Option(None, "--out", help="Also write the report as JSON here."),
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
        db: DbOption = None,
        admin_key: AdminKeyOption = None,
        run_dir: RunDirOption = None,
    ) -> None:
        """Run the validation tasks once each (validation.samples_per_task times) and print the baseline:
        success (reward >= 1) and mean reward, each ± 2 SE (a 95% interval, clustered by task), tool errors,
        tokens, latency, retries, gate violations by rule. Writes to OUTPUT_DIR/eval/NAME, not the run's store."""
        from alight_server.redaction.redactor import redact_for_people

        try:
            from alight_server.evaluation.policy import run_eval
            from alight_server.trainer.config.run import ConfigError, load_config
        except ImportError as exc:
            typer.echo(f"alight eval needs the server with its train extra ({exc}): pip install 'alight-server[train]'")
            raise typer.Exit(1) from exc
        try:
            train_config = load_config(config, parse_settings(settings))
        except ConfigError as exc:
            typer.echo(str(exc), err=True)
            raise typer.Exit(2) from exc
        folder = eval_folder(train_config, config, name, output_dir, into_run) if traces is None else None
        try:
            if traces is not None:
                report = _score_traces(train_config, traces, db, admin_key, run_dir)
            else:
                assert folder is not None
                report = run_eval(train_config, folder)
        except (RuntimeError, ValueError, FileNotFoundError) as exc:
            typer.echo(redact_for_people(f"alight eval: {exc}"), err=True)
            raise typer.Exit(1) from exc
        typer.echo(redact_for_people("\n".join(report.lines())))  # for people: nothing captured shows in the clear
        written = [p for p in (out, folder and folder / "report.json") if p is not None]
        for path in written:
            path.write_text(json.dumps(report.as_dict(), indent=2))
        if folder is not None:
            typer.echo(f"evaluation folder: {folder} (its store alight.db, logs/, report.json)")


def eval_folder(config: Any, config_path: Path, name: str | None, output_dir: Path | None, into_run: bool) -> Path:
    """Where an evaluation writes: `--output-dir`, else with `--into-run` the run's own output_dir, else
    OUTPUT_DIR/eval/NAME (NAME: `--name`, else the config file's name and the time, e.g. `quickstart-20261206-1624`)."""
    if into_run and output_dir is not None:
        typer.echo("alight eval: --into-run writes into the run's output_dir; leave out --output-dir", err=True)
        raise typer.Exit(2)
    if output_dir is not None:
        return output_dir.resolve()
    if into_run:
        return Path(config.output_dir)
    name = name or f"{config_path.stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        typer.echo(f"alight eval: --name {name!r} must be one folder name (letters, digits, '.', '_', '-')", err=True)
        raise typer.Exit(2)
    return Path(config.output_dir) / "eval" / name


def _score_traces(config: Any, run_id: str, db: str | None, admin_key: str | None, run_dir: Path | None) -> Any:
    """The config's evaluator over an imported run's trajectories (evaluation/traces.py)."""
    from alight_server.commands.data_import import open_cli_store
    from alight_server.evaluation.evaluators import load_evaluator
    from alight_server.evaluation.traces import evaluate_traces

    if config.evaluator is None:
        raise ValueError("--traces scores imported trajectories with the config's evaluator: set `evaluator:` in it")
    store = open_cli_store(db, admin_key, run_dir)
    try:
        return evaluate_traces(store, run_id, load_evaluator(config.evaluator))
    finally:
        store.close()
