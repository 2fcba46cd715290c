"""`alight controller`: run the server's queued attempts on this machine (or, later, on Kubernetes)."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

RUNNERS = ("local",)  # "k8s" arrives with the Kubernetes runner


def register(app: typer.Typer) -> None:
    @app.command("controller")
    def controller(
        server: str = typer.Option(..., "--server", envvar="ALIGHT_SERVER_URL", help="The alight server's URL."),
        admin_key: str = typer.Option(..., "--admin-key", envvar="ALIGHT_ADMIN_KEY", help="The server's admin key."),
        runner: str = typer.Option("local", "--runner", help="Where attempts run: local."),
        concurrency: int = typer.Option(4, "--concurrency", min=1, help="Attempts running at once, at most."),
        logs_dir: Path = typer.Option(
            Path(".alight/logs"), "--logs-dir", envvar="ALIGHT_LOGS_DIR", help="Captured output and attempt state."
        ),
        name: str | None = typer.Option(
            None, "--name", help="Runner name in attempt handles (default local@HOST); unique per controller."
        ),
        agent_server_url: str | None = typer.Option(
            None, "--agent-server-url", help="URL agents reach the server at (default: what the server hands out)."
        ),
        poll_interval: float = typer.Option(0.5, "--poll-interval", min=0.01, help="Seconds between reconcile ticks."),
        kill_grace: float = typer.Option(5.0, "--kill-grace", min=0, help="Seconds from SIGTERM to SIGKILL."),
        keep_running: bool = typer.Option(
            True,
            "--keep-running/--kill-on-exit",
            help="On exit, leave agents running for the next controller to adopt, or kill them (retried as infra).",
        ),
        log_level: str = typer.Option("info", "--log-level", envvar="ALIGHT_LOG_LEVEL"),
    ) -> None:
        """Claim queued attempts from the server, run them, and report how they ended."""
        try:
            from alight_server.controller.local import LocalRunner
            from alight_server.controller.loop import Controller
        except ImportError as exc:
            typer.echo(f"alight controller needs the server package ({exc}); pip install alight-server", err=True)
            raise typer.Exit(1) from exc
        from alight.client import AlightClient, ApiError

        if runner not in RUNNERS:
            typer.echo(f"unknown --runner {runner!r}; choose one of {', '.join(RUNNERS)}", err=True)
            raise typer.Exit(2)
        logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        if log_level.lower() != "debug":
            logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request drowns the attempt lines
        client = AlightClient(server, admin_key=admin_key)
        try:
            client.list_rollouts(limit=1)  # fail now, with a clear line, on a wrong URL or key
        except ApiError as exc:
            typer.echo(f"the server at {server} refused the admin key: {exc}", err=True)
            raise typer.Exit(1) from exc
        except Exception as exc:
            typer.echo(f"cannot reach the alight server at {server}: {exc}", err=True)
            raise typer.Exit(1) from exc
        local = LocalRunner(logs_dir, name=name, agent_server_url=agent_server_url)
        loop = Controller(
            client,
            local,
            concurrency=concurrency,
            poll_interval=poll_interval,
            kill_grace_s=kill_grace,
            kill_on_stop=not keep_running,
        )
        typer.echo(f"controller {local.name}: {server}, up to {concurrency} attempts, logs in {local.logs_dir}")
        loop.run()
