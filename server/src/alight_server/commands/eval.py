"""`alight eval CONFIG.yaml`: the policy on the validation tasks, no training; prints the baseline report."""

from __future__ import annotations

import json
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
        traces: str | None = typer.Option(
            None, "--traces", help="An imported run (alight data import): score its trajectories, run no agent."
        ),
        db: DbOption = None,
        admin_key: AdminKeyOption = None,
        run_dir: RunDirOption = None,
    ) -> None:
        """Run the validation tasks once each (validation.samples_per_task times) and print the baseline:
        success with its standard error, tool errors, tokens, latency, retries, gate violations by rule."""
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
        try:
            report = (
                run_eval(train_config)
                if traces is None
                else _score_traces(train_config, traces, db, admin_key, run_dir)
            )
        except (RuntimeError, ValueError, FileNotFoundError) as exc:
            typer.echo(redact_for_people(f"alight eval: {exc}"), err=True)
            raise typer.Exit(1) from exc
        typer.echo(redact_for_people("\n".join(report.lines())))  # for people: nothing captured shows in the clear
        if out is not None:
            out.write_text(json.dumps(report.as_dict(), indent=2))


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
