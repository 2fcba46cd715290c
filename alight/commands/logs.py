"""`alight logs ROLLOUT`: the captured stdout/stderr of a rollout's attempts, from the server or local disk."""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

import typer

from alight.attempt_logs import DEFAULT_LOGS_DIR, LOG_EVENT_KIND, SEALED_SUFFIX, attempt_dir
from alight.commands.exits import exit_with
from alight.commands.options import AdminKeyOption, ServerOption


def _local_logs(logs_dir: Path, rollout_id: str) -> dict[int, Path]:
    """The local runner's capture files, where this machine ran the attempts: `<n>.log` while an attempt runs,
    `<n>.log.sealed` once it ended (`_read_local` opens it)."""
    folder = attempt_dir(logs_dir, rollout_id)
    found = {int(n): p for p in folder.glob(f"*.log{SEALED_SUFFIX}") if (n := p.name.split(".")[0]).isdigit()}
    found.update({int(p.stem): p for p in folder.glob("*.log") if p.stem.isdigit()})
    return found


def _read_local(path: Path, admin_key: str | None) -> str:
    """A local log's text; a sealed one is opened by the server package (entry point `alight.server: open_log`)
    with the key from ALIGHT_DATA_KEY, ALIGHT_SECRET_KEY, the admin key or an embedded run's stack.json."""
    if not path.name.endswith(SEALED_SUFFIX):
        return path.read_text(errors="replace")
    found = entry_points(group="alight.server", name="open_log")
    if not found:
        raise exit_with(f"{path} is sealed: reading it needs pip install alight-server")
    try:
        return next(iter(found)).load()(path, admin_key)
    except Exception as exc:  # the server package's SealError / KekError, whose message says what to fix
        raise exit_with(f"cannot open {path}: {exc}") from exc


def _server_logs(
    server: str, admin_key: str | None, rollout_id: str, reveal: bool
) -> tuple[dict[int, str], dict[int, str]]:
    """({attempt: uploaded log text}, {attempt: one-line status}) as the server knows them (it redacts them)."""
    from alight.client import AlightClient

    client = AlightClient(server, admin_key=admin_key)
    rollout = client.get_rollout(rollout_id)
    events = client.list_events(rollout_id, kind=LOG_EVENT_KIND, reveal=reveal)
    texts = {e.attempt: str(e.payload.get("text", "")) for e in events if e.attempt is not None}
    states: dict[int, str] = {}
    for a in rollout.attempts:
        kind = f", {a.failure_kind}" if a.failure_kind else ""
        code = f", exit code {a.exit_code}" if a.exit_code is not None else ""
        states[a.attempt] = f"{a.status}{kind}{code}"
    return texts, states


def local_redactor() -> Callable[[str], str] | None:
    """The server package's redaction (entry point `alight.server: redact`) for logs read from this disk."""
    found = entry_points(group="alight.server", name="redact")
    try:
        return next(iter(found)).load() if found else None
    except ImportError:
        return None


def register(app: typer.Typer) -> None:
    @app.command("logs")
    def logs(
        rollout: str = typer.Argument(..., help="The rollout id."),
        attempt: int | None = typer.Option(None, "--attempt", min=1, help="Only this attempt (default: all)."),
        server: ServerOption = None,
        admin_key: AdminKeyOption = None,
        logs_dir: Path = typer.Option(Path(DEFAULT_LOGS_DIR), "--logs-dir", envvar="ALIGHT_LOGS_DIR"),
        reveal: bool = typer.Option(
            False, "--reveal", help="Print the exact output; by default secrets and personal data are redacted."
        ),
    ) -> None:
        """Print what a rollout's agent wrote to stdout and stderr, attempt by attempt (redacted unless --reveal)."""
        redact = None if reveal else local_redactor()
        if not reveal and redact is None:
            typer.echo("alight logs: no redaction here (pip install alight-server); showing logs as captured", err=True)
        texts: dict[int, str] = {}
        states: dict[int, str] = {}
        if server:
            from alight.client import ApiError

            try:
                texts, states = _server_logs(server, admin_key, rollout, reveal)
            except ApiError as exc:
                if exc.status_code != 404:
                    raise exit_with(f"the server at {server} refused: {exc}") from exc
            except Exception as exc:
                typer.echo(f"cannot reach {server} ({exc}); showing local logs only", err=True)
        local = _local_logs(logs_dir, rollout)
        numbers = [attempt] if attempt is not None else sorted(set(texts) | set(states) | set(local))
        shown = 0
        for n in numbers:
            # A running attempt has no uploaded log yet; the local file is its live output.
            text = texts.get(n)
            if text is None and n in local:
                text = _read_local(local[n], admin_key)
                text = redact(text) if redact is not None else text
            if text is None:
                continue
            if attempt is None:
                typer.echo(f"── attempt {n}" + (f" ({states[n]})" if n in states else "") + " ──")
            sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
            shown += 1
        if not shown:
            where = f"on {server} or " if server else ""
            which = f" attempt {attempt}" if attempt is not None else ""
            raise exit_with(f"no captured output for rollout {rollout!r}{which} {where}under {logs_dir}")
