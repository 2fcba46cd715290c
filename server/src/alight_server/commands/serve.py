"""`alight serve`: run the server (store, API, gateway, OTLP ingest) from flags, ALIGHT_* env vars or YAML."""

from __future__ import annotations

import ipaddress
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from alight_server.commands.options import AdminKeyOption, DbOption, LogLevelOption, ServerConfigOption

if TYPE_CHECKING:
    from alight_server.config import ServerConfig


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def db_url(value: str) -> str:
    """A SQLAlchemy URL as given, or a plain file path as a SQLite URL."""
    return value if "://" in value else f"sqlite:///{Path(value).expanduser().resolve()}"


def load_yaml(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise typer.BadParameter(f"cannot read {path}: {exc}", param_hint="--config") from exc
    if not isinstance(data, dict):
        raise typer.BadParameter(f"{path} must hold a mapping of server settings", param_hint="--config")
    return data


def build_config(config_file: Path | None, overrides: dict[str, Any]) -> ServerConfig:
    """Settings from the YAML file, then the flags/env vars that were given (None = not given)."""
    from alight_server.config import ServerConfig

    settings = load_yaml(config_file) if config_file is not None else {}
    settings.update({k: v for k, v in overrides.items() if v is not None})
    if "db_url" in settings:
        settings["db_url"] = db_url(str(settings["db_url"]))
    return ServerConfig.model_validate(settings)


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        host: str | None = typer.Option(
            None, "--host", envvar="ALIGHT_HOST", help="Interface to bind (default 127.0.0.1)."
        ),
        port: int | None = typer.Option(None, "--port", envvar="ALIGHT_PORT", help="TCP port (default 8700)."),
        db: DbOption = None,
        admin_key: AdminKeyOption = None,
        viewer_keys: str | None = typer.Option(
            None,
            "--viewer-keys",
            envvar="ALIGHT_VIEWER_KEYS",
            help="Comma-separated keys that read redacted copies only (no reveal, no writes); or viewer_key_file.",
        ),
        public_url: str | None = typer.Option(
            None, "--public-url", envvar="ALIGHT_PUBLIC_URL", help="URL agents reach this server at."
        ),
        log_level: LogLevelOption = None,
        config: ServerConfigOption = None,
        upstream_key_env: str | None = typer.Option(
            None,
            "--upstream-key-env",
            envvar="ALIGHT_UPSTREAM_KEY_ENV",
            help="Comma-separated name patterns (VLLM_*) of variables an upstream's api_key_env may name; "
            "never ALIGHT_*. Default: none.",
        ),
        upstream_key_dir: Path | None = typer.Option(
            None,
            "--upstream-key-dir",
            envvar="ALIGHT_UPSTREAM_KEY_DIR",
            help="The folder an upstream's api_key_file must be under. Default: none.",
        ),
        data_key: str | None = typer.Option(
            None,
            "--data-key",
            envvar="ALIGHT_DATA_KEY",
            help="The key that wraps the store's data keys: secret (default), file:PATH or command:CMD.",
        ),
    ) -> None:
        """Serve the alight API, gateway and OTLP ingest. Flags beat env vars beat the YAML file."""
        import uvicorn

        from alight_server.app import create_app
        from alight_server.gateway.request.arrival import StampedHttp
        from alight_server.http.auth import generate_admin_key
        from alight_server.store import StoreError, open_store
        from alight_server.store.keys.kek import KekError

        given = {"host": host, "port": port, "db_url": db, "admin_key": admin_key, "public_url": public_url,
                 "upstream_key_env": upstream_key_env, "upstream_key_dir": upstream_key_dir,
                 "data_key": data_key, "viewer_keys": viewer_keys}  # fmt: skip
        cfg = _settings(config, {**given, "log_level": log_level})

        if not cfg.admin_key:
            if not is_loopback(cfg.host):
                typer.echo(
                    f"refusing to serve on {cfg.host} without an admin key: pass --admin-key or set ALIGHT_ADMIN_KEY "
                    "(only a loopback address gets a generated key)",
                    err=True,
                )
                raise typer.Exit(2)
            cfg = cfg.model_copy(update={"admin_key": generate_admin_key()})
            typer.echo(f"admin key (generated, shown once): {cfg.admin_key}")

        logging.basicConfig(level=cfg.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        try:
            store = open_store(cfg.db_url, cfg.kek_source())
        except (StoreError, KekError) as exc:  # KekError: the data_key's file or command gave no key
            typer.echo(f"cannot open the store: {exc}", err=True)
            raise typer.Exit(1) from exc
        except Exception as exc:  # bad URL, unreachable database, missing driver
            typer.echo(f"cannot open the store at {cfg.db_url}: {type(exc).__name__}: {exc}", err=True)
            raise typer.Exit(1) from exc
        from alight_server.store.keys.upstream import UpstreamKeyError

        try:
            app = create_app(cfg, store=store)
        except UpstreamKeyError as exc:  # stored upstream keys this server's ALIGHT_SECRET_KEY cannot open
            typer.echo(f"cannot start: {exc}", err=True)
            raise typer.Exit(1) from exc
        typer.echo(f"alight server on http://{cfg.host}:{cfg.port} (store: {_redacted(cfg.db_url)})")
        uvicorn.run(
            app,
            host=cfg.host,
            port=cfg.port,
            log_level=cfg.log_level.lower(),
            timeout_graceful_shutdown=10,  # open long-polls must not delay a restart by minutes
            http=StampedHttp,  # the gateway's response-start metric counts from the accept
        )


def _settings(config: Path | None, given: dict[str, Any]) -> ServerConfig:
    """The server's settings from the YAML file and the options given; exits on invalid ones."""
    from pydantic import ValidationError

    try:
        cfg = build_config(config, given)
        cfg.all_viewer_keys()  # viewer_key_file: readable, and no key in it the admin key or too short
    except (ValidationError, ValueError) as exc:
        typer.echo(f"invalid server settings: {exc}", err=True)
        raise typer.Exit(2) from exc
    return cfg


def _redacted(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
