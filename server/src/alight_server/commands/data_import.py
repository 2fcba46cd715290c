"""`alight data import FILE... --format F --name NAME` and `alight data check NAME`: traces in, the builder's view out."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from alight.commands.console import output_console
from alight.commands.exits import exit_with
from alight_server.commands.options import (
    DEFAULT_DB,
    AdminKeyOption,
    DbOption,
    JsonOption,
    ModelOption,
    TrainingConfigOption,
)
from alight_server.traces.formats import READERS

FORMATS = tuple(READERS)


def open_cli_store(db: str | None, admin_key: str | None, run_dir: Path | None = None) -> Any:
    """The store a server with these settings opens, under the same key-encryption key (store/keys/kek.py), or a
    training run's store with the key its folder keeps (stacks/run_store.py)."""
    from alight_server.commands.serve import db_url
    from alight_server.stacks.run_store import StoreTarget, open_target, run_target

    try:
        return open_target(
            run_target(run_dir) if run_dir is not None else StoreTarget(db_url(db or DEFAULT_DB), admin_key, None)
        )
    except Exception as exc:  # a StoreOpenError, a StoreError, a bad URL, an unreachable database, a missing driver
        raise exit_with(f"cannot open the store at {run_dir or db}: {exc}") from exc


def _training_config(config: Path) -> Any:
    from alight_server.trainer.config.run import ConfigError, load_config

    try:
        return load_config(config)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from exc


def _renderer(model: str, option: str) -> Any:
    """The policy's tokenizer and template, or a message naming the model that did not load."""
    from alight_server.traces.render import Renderer

    try:
        return Renderer.for_model(model)
    except (OSError, RuntimeError, ValueError) as exc:  # an unknown name, a folder without a tokenizer
        raise typer.BadParameter(f"cannot load the tokenizer of model {model!r}: {exc}", param_hint=option) from exc


def import_traces(
    files: list[Path] = typer.Argument(..., help="Trace files (or folders of session files), read in order."),
    fmt: str = typer.Option(..., "--format", help=f"One of {', '.join(FORMATS)}."),
    name: str = typer.Option(..., "--name", help="The run the rollouts go under (rollout ids NAME-...)."),
    task_key: str | None = typer.Option(None, "--task-key", help="Group sessions whose task has the same value here."),
    model: ModelOption = None,
    config: TrainingConfigOption = None,
    db: DbOption = None,
    admin_key: AdminKeyOption = None,
) -> None:
    """Import traces as a run of offline rollouts: exact calls as recorded, text-only calls rendered (docs/traces.md)."""
    if fmt not in FORMATS:
        raise typer.BadParameter(
            f"{fmt!r} is not a trace format; use one of {', '.join(FORMATS)}", param_hint="--format"
        )
    if not re.fullmatch(r"[A-Za-z0-9._:]{1,100}", name):
        raise typer.BadParameter(
            f"{name!r}: use letters, digits, '.', '_' and ':' only (no '-': a rollout's run is the text before "
            "its first '-')",
            param_hint="--name",
        )
    if missing := [str(f) for f in files if not f.exists()]:
        raise typer.BadParameter(f"no such file: {', '.join(missing)}", param_hint="FILE")
    from alight_server.traces.importer import import_traces as store_traces
    from alight_server.traces.model import TraceFormatError

    try:
        parsed = READERS[fmt](files)
    except TraceFormatError as exc:
        raise exit_with(f"alight data import: {exc}") from exc
    chosen = model or (_training_config(config).model if config is not None else None)
    text_only = sum(not c.exact and c.problem is None for s in parsed.sessions for c in s.calls)
    if text_only and not chosen:
        raise typer.BadParameter(
            f"{text_only} calls were logged as text only: name the policy to render them with its chat template "
            "(--model NAME, or --config CONFIG for its model)",
            param_hint="--model",
        )
    renderer = _renderer(chosen, "--model") if chosen else None
    with contextlib.closing(open_cli_store(db, admin_key)) as store:
        report = store_traces(store, name, fmt, parsed, renderer, task_key=task_key)
    typer.echo("\n".join(report.lines(name)))
    if report.sessions == 0:
        raise typer.Exit(1)


def check(
    name: str = typer.Argument(..., help="The imported run (or any run) to check."),
    config: TrainingConfigOption = None,
    model: ModelOption = None,
    db: DbOption = None,
    admin_key: AdminKeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """What the sample builder would make of these traces: calls, fidelity, rows, prefix breaks and where they start."""
    from alight_server.traces.check import check_run
    from alight_server.trainer.step.samples import SampleConfig

    sample_config = SampleConfig()
    if config is not None:
        loaded = _training_config(config)
        sample_config, model = SampleConfig.from_section(loaded.samples), model or loaded.model
    decode = _renderer(model, "--model").decode if model else None
    with contextlib.closing(open_cli_store(db, admin_key)) as store:
        report = check_run(store, name, sample_config, decode)
    if as_json:
        typer.echo(json.dumps(report.as_dict(), indent=2))
        return
    if not report.trajectories:
        raise exit_with(f"alight data check: no rollouts under run {name!r} in this store")
    print_report(report, output_console())


def print_report(report: Any, console: Console) -> None:
    table = Table(title=f"run {report.run_id}: {len(report.trajectories)} trajectories")
    for column in ("rollout", "source", "calls", "exact", "rendered", "left out", "rows", "breaks", "first difference"):
        table.add_column(column, overflow="fold")
    for t in report.trajectories:
        first = t.divergences[0] if t.divergences else None
        where = "-" if first is None else (
            f"call {first.call} token {first.position} ({first.cause}): "
            + (f"{first.expected_text!r} vs {first.prompt_text!r}" if first.expected_text is not None
               else f"{first.expected_ids} vs {first.prompt_ids}")
        )  # fmt: skip
        breaks = ", ".join(f"{k} {v}" for k, v in sorted(t.breaks.items())) or "-"
        table.add_row(
            t.rollout_id, t.source or "", str(t.calls), str(t.exact), str(t.rendered), str(t.left_out), str(t.rows),
            breaks, where,
        )  # fmt: skip
    console.print(table)
    build = report.build
    console.print(
        f"rows after merging {int(build['rows'])} from {int(build['calls'])} calls "
        f"({int(build['calls_used'])} used, {int(build['trained_tokens'])} trained tokens); "
        f"prefix breaks {dict(report.breaks) or 'none'}; new conversations beyond each trajectory's first "
        f"{sum(max(t.conversations - 1, 0) for t in report.trajectories)} (sub-agents, fresh tasks); "
        f"truncated rows {report.truncated_rows} "
        f"({report.truncated_tokens} tokens)"
    )
    if report.dropped_calls:
        console.print(f"calls left out by the builder: {report.dropped_calls}")
    if report.unscored:
        console.print(
            f"{report.unscored} trajectories have no reward yet (counted as 0 here; score them with alight eval --traces)"
        )
    for t in report.trajectories:
        for message in t.unrendered:
            console.print(f"not imported ({t.rollout_id}): {message}")
