"""`alight data clean TASKS.jsonl`: the coding tasks' filters that run before training, with a report of what was dropped.

Registered under the server's `alight data` through the `alight.data_commands` entry point group, so the server
never imports this kit; `--probe` runs the config's policy, which needs alight-server[train].
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import typer

from alight_sandbox.cleaning import STATEMENT_FIELD, Probe, clean_tasks


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (OSError, ValueError, EOFError) as exc:
        raise typer.BadParameter(f"cannot read JSONL from {path}: {exc}", param_hint="TASKS") from exc
    bad = [i for i, row in enumerate(rows) if not isinstance(row, dict)]
    if bad:
        raise typer.BadParameter(f"line {bad[0] + 1} of {path} is not a JSON object", param_hint="TASKS")
    return rows


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _probe(config: Path, k: int, settings: list[str]) -> Probe:
    """k rollouts per task of the config's policy (train mode: sampled, as training would see them)."""
    from alight.schemas import Mode
    from alight_server.commands.train import parse_settings

    try:
        from alight_server.evaluation.policy import run_rollouts
        from alight_server.trainer.config.run import load_config
    except ImportError as exc:
        raise typer.BadParameter(
            f"--probe needs pip install 'alight-server[train]' ({exc})", param_hint="--probe"
        ) from exc
    train_config = load_config(config, parse_settings(settings))

    def probe(tasks: list[dict[str, Any]]) -> list[list[float | None]]:
        report, scores = run_rollouts(train_config, "probe", tasks, k, Mode.TRAIN)
        typer.echo("\n".join(report.lines("difficulty probe")))
        return scores

    return probe


def _hook(target: str | None, option: str) -> Any:
    """The function a FILE.py:FUNCTION option names, or None when it is not given."""
    from alight.entry import load_target

    try:
        return load_target(target) if target else None
    except (ValueError, ImportError, AttributeError) as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from exc


def clean(
    tasks: Path = typer.Argument(..., help="Tasks as JSONL, one JSON object a line (gzipped if it ends in .gz)."),
    out_dir: Path = typer.Option(..., "--out-dir", help="Writes train.jsonl, val.jsonl and clean_report.json here."),
    max_tests: int = typer.Option(2000, "--max-tests", min=1, help="Drop tasks with more FAIL_TO_PASS + PASS_TO_PASS."),
    statement_field: str = typer.Option(
        STATEMENT_FIELD, "--statement-field", help="The task field the agent reads; a task without it is kept."
    ),
    hidden_tests: str | None = typer.Option(
        None,
        "--hidden-tests",
        help="path/to/file.py:function (task -> {test file: source}): report statements quoting a hidden assertion.",
    ),
    drop_quoting: bool = typer.Option(
        False, "--drop-quoting", help="Drop the tasks whose statement quotes a hidden assertion (needs --hidden-tests)."
    ),
    reproduce: str | None = typer.Option(
        None, "--reproduce", help="path/to/file.py:function (task -> bool): does the task's bug show?"
    ),
    probe_config: Path | None = typer.Option(None, "--probe", help="Training config: probe each task with its policy."),
    k: int = typer.Option(4, "--k", min=1, help="Probe rollouts per task."),
    keep_failed: float = typer.Option(0.1, "--keep-failed", min=0.0, max=1.0, help="Share of all-failed tasks kept."),
    val_fraction: float = typer.Option(0.2, "--val-fraction", min=0.0, max=1.0),
    seed: int = typer.Option(0, "--seed"),
    settings: list[str] = typer.Option([], "--set", help="Override a key of the --probe config."),
) -> None:
    """Drop empty, oversized, statement-quoting and non-reproducing tasks, probe difficulty, write a split and a report."""
    rows = _read_jsonl(tasks)
    if drop_quoting and not hidden_tests:
        raise typer.BadParameter(
            "needs --hidden-tests FILE.py:FUNCTION to find the quotes", param_hint="--drop-quoting"
        )
    checker = _hook(reproduce, "--reproduce")
    sources = _hook(hidden_tests, "--hidden-tests")
    probe = _probe(probe_config, k, settings) if probe_config else None
    train, val, report = clean_tasks(
        rows,
        max_tests=max_tests,
        statement_field=statement_field,
        hidden_tests=sources,
        drop_quoting=drop_quoting,
        reproduces=checker,
        probe=probe,
        keep_failed=keep_failed,
        val_fraction=val_fraction,
        seed=seed,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_jsonl(out_dir / "train.jsonl", train)
    _write_jsonl(out_dir / "val.jsonl", val)
    (out_dir / "clean_report.json").write_text(json.dumps(report.as_dict(), indent=2))
    typer.echo("\n".join(report.lines()))
    typer.echo(f"wrote {out_dir / 'train.jsonl'}, {out_dir / 'val.jsonl'}, {out_dir / 'clean_report.json'}")


def register(data_app: typer.Typer) -> None:
    data_app.command("clean")(clean)
