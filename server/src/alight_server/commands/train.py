"""`alight train CONFIG.yaml`: one RL training run (the embedded stack unless `--server` names yours)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from alight.commands.exits import exit_with
from alight_server.commands.options import SettingsOption

if TYPE_CHECKING:
    from alight.comparison import Comparison
    from alight.evaluation import EvalReport


def parse_settings(settings: list[str] | None) -> dict[str, Any]:
    """`--set KEY=VALUE` options as config overrides; exits with a message on a malformed one."""
    overrides: dict[str, Any] = {}
    for item in settings or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise exit_with(f"--set expects KEY=VALUE, got {item!r}", 2)
        try:  # VALUE as YAML-ish JSON (numbers, true/false, null, lists), else the plain string
            overrides[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key.strip()] = value
    return overrides


def print_validation_reports(run_dir: Path) -> tuple[Comparison | None, dict[str, EvalReport], str]:
    """Print the reports of the run's first and last validation (as `alight eval` prints them) and the last compared
    with the first, paired by task as `alight eval --against` compares candidates (also written as comparison.json
    and comparison.png in the run's folder). Returns what `gate` reads: the comparison (None when there is nothing
    to pair), the two reports by name and, without a comparison, why."""
    from alight.comparison import compare_reports
    from alight_server.commands.eval_compare import Candidate, write_comparison
    from alight_server.evaluation.policy import validation_reports

    reports = validation_reports(run_dir)
    if not reports:
        return None, {}, "the run recorded no validation"
    steps = sorted(reports)
    for step in dict.fromkeys([steps[0], steps[-1]]):
        title = "before training" if step == steps[0] else f"after training (step {step})"
        typer.echo("\n".join(reports[step].lines(title)))
    if len(steps) < 2:
        return None, {}, "the run validated once: no validation after training to compare"
    names = ("before training", f"after training (step {steps[-1]})")
    named = {names[0]: reports[steps[0]], names[1]: reports[steps[-1]]}
    try:
        comparison = compare_reports(reports[steps[0]], reports[steps[-1]], names)
    except ValueError as exc:  # a run resumed with other validation tasks: nothing to pair
        typer.echo(f"no paired comparison of the validations: {exc}")
        return None, named, f"no paired comparison of the validations ({exc})"
    typer.echo("\n".join(comparison.lines()))
    ends = (steps[0], steps[-1])
    first, last = (Candidate(n, source=f"validation at step {s}") for n, s in zip(names, ends, strict=True))
    write_comparison(run_dir, first, [last], [comparison])
    return comparison, named, ""


def safety_stop_step(history: list[dict[str, Any]]) -> int | None:
    """The step the regression suite's safety rule stopped the run at (`regression/safety_stop`); None if it ran on."""
    return next((int(row["step"]) for row in history if row.get("regression/safety_stop")), None)


def gate(
    compared: tuple[Comparison | None, dict[str, EvalReport], str],
    junit: Path | None,
    markdown: Path | None,
    stopped_at: int | None = None,
) -> tuple[int, str]:
    """The run's verdict as `alight eval` gives a comparison's (commands/eval_compare.py `exit_status`): its exit
    status and line, with the JUnit XML and Markdown summary written where asked. No comparison to judge is an
    infrastructure failure (exit 1): a gate must not pass a run it could not judge. A run the safety rule stopped
    (`stopped_at`) is exit 6 whatever its validations compare to."""
    from alight_server.commands.eval_compare import (
        EXIT_FAILED,
        EXIT_SAFETY_STOP,
        OUTCOMES,
        exit_status,
        write_junit,
        write_markdown,
    )

    comparison, reports, why = compared
    if stopped_at is not None:
        code, why = EXIT_SAFETY_STOP, f"the regression suite's safety rule stopped it at step {stopped_at}"
        verdict = f"verdict: {OUTCOMES[code]} (exit {code}; {why})"
    elif comparison is None:
        code, verdict = EXIT_FAILED, f"verdict: infrastructure failure (exit {EXIT_FAILED}; {why})"
    else:
        code, verdict = exit_status([comparison], reports)
    comparisons = [comparison] if comparison is not None else []
    if junit is not None:
        write_junit(junit, comparisons, command="alight train")
    if markdown is not None:
        write_markdown(markdown, comparisons, verdict, command="alight train")
    return code, verdict


def register(app: typer.Typer) -> None:
    app.command("train")(train)


def train(
    config: Path = typer.Argument(..., help="Training config (YAML); see docs/training.md."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in output_dir from its last checkpoint."),
    init_from: Path | None = typer.Option(
        None,
        "--init-from",
        help="Start the policy from another run's checkpoint (a run folder or its step-N "
        "folder); the optimizer and step start afresh, e.g. RL after fine-tuning (docs/traces.md).",
    ),
    steps: int | None = typer.Option(None, "--steps", min=0, help="Override `steps`."),
    lr: float | None = typer.Option(None, "--lr", help="Override `optimizer.lr`."),
    seed: int | None = typer.Option(None, "--seed", help="Override `seed`."),
    output_dir: str | None = typer.Option(None, "--output-dir", help="Override `output_dir`."),
    # Not options.ServerOption: no ALIGHT_SERVER_URL here, so a variable left set cannot move a run off the stack.
    server: str | None = typer.Option(
        None, "--server", help="Use this alight server (and your controller) instead of the embedded stack."
    ),
    inference_url: str | None = typer.Option(
        None, "--inference-url", help="With --server: the policy's inference server, for weight updates."
    ),
    settings: SettingsOption = None,
    quiet: bool = typer.Option(False, "--quiet", help="No live progress display."),
    gate_on: bool = typer.Option(
        False,
        "--gate",
        help="Exit with the verdict of the last validation against the first, as alight eval's comparison "
        "does: 0 improved, 3 no change, 4 worse, 5 safety regression, 1 infrastructure failure (6, a run the "
        "regression suite's safety rule stopped, with or without --gate).",
    ),
    junit: Path | None = typer.Option(
        None,
        "--junit",
        help="Also write the first/last validation comparison as JUnit XML (a failed case per metric worse).",
    ),
    markdown: Path | None = typer.Option(
        None, "--markdown", help="Also write a Markdown summary of it (the verdict and the table)."
    ),
) -> None:
    """Train the policy on the agent's rollouts; prints a before/after table and the plot path. Exits 0 when
    the run ends, 1 when it fails, 6 when the regression suite's safety rule stopped it; with --gate, with the
    verdict of its last validation against its first (docs/pilot.md, "Exit codes")."""
    named = {"steps": steps, "optimizer.lr": lr, "seed": seed, "output_dir": output_dir, "server.url": server,
             "server.inference_url": inference_url}  # fmt: skip
    train_config = _train_config(config, settings, named, init_from)
    signal.signal(signal.SIGTERM, _interrupt)
    if int(os.environ.get("RANK", "0")) > 0:  # torchrun's other ranks train only; rank 0 runs everything else
        from alight_server.trainer.backends.base import follow_rank

        follow_rank(train_config)
        return
    if code := _run(train_config, resume=resume, quiet=quiet, reports=(junit, markdown), gate_on=gate_on):
        raise typer.Exit(code)


def train_extra_missing(exc: ImportError, command: str = "alight train") -> typer.Exit:
    return exit_with(f"{command} needs the server with its train extra ({exc}): pip install 'alight-server[train]'")


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt  # SIGTERM tears the embedded stack down like Ctrl-C does


def training_config(
    path: Path, overrides: dict[str, Any] | None = None, command: str = "alight train", label: str = ""
) -> Any:
    """The training config at `path` with `overrides` over it; exits 2 when it is invalid (the message after
    `label`), 1 without the train extra."""
    try:
        from alight_server.trainer.config.run import ConfigError, load_config
    except ImportError as exc:
        raise train_extra_missing(exc, command) from exc
    try:
        return load_config(path, overrides)
    except ConfigError as exc:
        raise exit_with(f"{label}{exc}", 2) from exc


def _train_config(config: Path, settings: list[str] | None, named: dict[str, Any], init_from: Path | None) -> Any:
    """The run's config: the file, `--set` and the named options over it, and `--init-from`'s model."""
    overrides = parse_settings(settings)
    overrides.update({k: v for k, v in named.items() if v is not None})
    if named["output_dir"] is not None:
        overrides["output_dir"] = str(Path(named["output_dir"]).resolve())  # relative to where the command runs
    train_config = training_config(config, overrides)
    if init_from is None:
        return train_config
    return with_checkpoint(train_config, init_from, Path(train_config.output_dir), "alight train:")


def with_checkpoint(config: Any, checkpoint: Path, folder: Path, option: str) -> Any:
    """`config` whose policy is the checkpoint's, exported into `folder`; exits 2 naming `option` when it is not one."""
    from alight_server.trainer.run.init_from import init_model

    try:
        model = init_model(checkpoint, config.model, folder)
    except ValueError as exc:
        raise exit_with(f"{option} {exc}", 2) from exc
    return config.model_copy(update={"model": model})


def _run(
    train_config: Any, *, resume: bool, quiet: bool, reports: tuple[Path | None, Path | None], gate_on: bool
) -> int:
    """The training run on the embedded stack (or the configured server), then its validation reports; the
    exit status (the verdict's with `gate_on`)."""
    try:
        from alight_server.stacks.opening import TrainingStacks
        from alight_server.trainer.run.loop import TrainingRun
    except ImportError as exc:
        raise train_extra_missing(exc) from exc
    try:
        result = TrainingRun(train_config, stacks=TrainingStacks(), resume=resume, show_progress=not quiet).run()
    except KeyboardInterrupt:
        raise exit_with("interrupted: the stack is down; continue with --resume", 130) from None
    except (RuntimeError, ValueError, FileNotFoundError) as exc:
        raise exit_with(f"alight train: {exc}") from exc
    compared = print_validation_reports(result.run_dir)
    typer.echo(f"summary: {result.summary_path}")
    stopped_at = safety_stop_step(result.history)
    if not gate_on and reports == (None, None) and stopped_at is None:
        return 0
    code, verdict = gate(compared, *reports, stopped_at=stopped_at)
    typer.echo(verdict)
    return code if gate_on or stopped_at is not None else 0
