"""`alight data export RUN`: a run's rollouts, model calls and training rows as alight-export JSON Lines.

The format is docs/data.md#export-format and the lines commands/export_format.py's; this command writes them to
stdout or a file. `--redacted` writes a copy for people: text through the redaction detectors, token ids dropped
(they decode back to the text).
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import typer

from alight.commands.exits import exit_with
from alight_server.commands.options import AdminKeyOption, RunDirOption, ServerConfigOption, ServerOption


@contextmanager
def _output(path: Path | None) -> Iterator[IO[str]]:
    """Standard output, or a file (gzip for `.gz`) that appears under its name only once complete."""
    if path is None:
        yield sys.stdout
        return
    partial = path.with_name(path.name + ".partial")
    try:
        with gzip.open(partial, "wt", encoding="utf-8") if path.suffix == ".gz" else partial.open("w") as f:
            yield f
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def export(
    run_id: str = typer.Argument(..., help="The training run's id, as the dashboard and GET /api/runs list it."),
    out: Path | None = typer.Option(None, "-o", "--out", help="Write here (gzip when it ends in .gz); default stdout."),
    redacted: bool = typer.Option(False, "--redacted", help="A copy for people: text redacted, token ids dropped."),
    server: ServerOption = None,
    admin_key: AdminKeyOption = None,
    config: ServerConfigOption = None,
    run_dir: RunDirOption = None,  # instead of --server: read through a server of this command's own
) -> None:
    """Write a run's rollouts, model calls and training rows as JSON Lines (docs/data.md#export-format)."""
    import httpx  # here, not at the top: `alight --help` registers this command without its client

    from alight.client import AlightClient, ApiError
    from alight_server.commands.export_format import ExportError, export_lines, redact_line
    from alight_server.store.keys.kek import KekError

    if run_dir is not None:
        from alight_server.stacks.run_store import StoreOpenError, served_run

        try:
            with served_run(run_dir) as (url, key):
                export(run_id, out, redacted, url, key, config, None)
        except (StoreOpenError, KekError) as exc:
            raise exit_with(f"alight data export: cannot open the store of {run_dir}: {exc}") from exc
        return
    if not server:
        raise typer.BadParameter(
            "give the server's URL (or set ALIGHT_SERVER_URL), or a training run's folder with --run-dir",
            param_hint="--server",
        )
    try:
        import alight_server.trainer.step.samples  # noqa: F401  (torch: the sample builder's tensors)
    except ImportError as exc:
        raise exit_with(
            f"alight data export runs the sample builder, which needs torch ({exc}): pip install 'alight-server[train]'"
        ) from exc
    redact = _redactor(config) if redacted else None
    counts: dict[str, int] = {}
    with AlightClient(server, admin_key=admin_key, timeout=120) as client:
        try:
            with _output(out) as f:
                for line in export_lines(client, run_id):
                    kind = str(line.get("kind", "header"))
                    counts[kind] = counts.get(kind, 0) + 1
                    f.write(json.dumps(redact_line(line, redact) if redact else line) + "\n")
        except ExportError as exc:
            raise exit_with(f"alight data export: {exc}") from exc
        except ApiError as exc:
            raise exit_with(f"alight data export: the server at {server} refused: {exc}") from exc
        except httpx.TransportError as exc:
            raise exit_with(f"alight data export: cannot reach {server} ({exc}): is the server running there?") from exc
    if out is not None:
        typer.echo(
            f"wrote {out}: {counts.get('rollout', 0)} rollouts, {counts.get('call', 0)} calls, "
            f"{counts.get('row', 0)} training rows" + (" (redacted)" if redacted else "")
        )


def _redactor(config: Path | None) -> Callable[[Any], Any]:
    """The server config's `redaction:` section (its detectors and patterns), or the defaults without one."""
    from pydantic import ValidationError

    from alight_server.commands.serve import load_yaml
    from alight_server.redaction import RedactionConfig, Redactor, default_redactor

    if config is None:
        return default_redactor().redact_json
    try:
        section = RedactionConfig.model_validate(load_yaml(config).get("redaction") or {})
    except ValidationError as exc:
        raise typer.BadParameter(f"the redaction: section of {config}: {exc}", param_hint="--config") from exc
    return Redactor(section).redact_json
