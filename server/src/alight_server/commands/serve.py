"""`alight serve`: run the server (store, API, gateway, OTLP ingest) from flags, ALIGHT_* env vars or YAML."""

from __future__ import annotations

import ipaddress
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from alight.commands.exits import exit_with
from alight_server.commands.options import AdminKeyOption, DbOption, LogLevelOption, RunDirOption, ServerConfigOption

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
        reviewer_keys: str | None = typer.Option(
            None,
            "--reviewer-keys",
            envvar="ALIGHT_REVIEWER_KEYS",
            help="Comma-separated keys that read redacted copies and decide the review queue, nothing else; "
            "or reviewer_key_file.",
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
        run_dir: RunDirOption = None,
    ) -> None:
        """Serve the alight API, gateway and OTLP ingest. Flags beat env vars beat the YAML file."""
        import uvicorn

        from alight_server.app import create_app
        from alight_server.gateway.request.arrival import StampedHttp
        from alight_server.http.auth import generate_admin_key
        from alight_server.stacks.run_store import StoreOpenError, StoreTarget, open_target
        from alight_server.stacks.state import STATE_FILE
        from alight_server.store import StoreError
        from alight_server.store.keys.kek import KekError

        if run_dir is not None:
            db, admin_key, run_key = _run_store(run_dir, db, admin_key)
            data_key = data_key or run_key
        given = {"host": host, "port": port, "db_url": db, "admin_key": admin_key, "public_url": public_url,
                 "upstream_key_env": upstream_key_env, "upstream_key_dir": upstream_key_dir,
                 "data_key": data_key, "viewer_keys": viewer_keys, "reviewer_keys": reviewer_keys}  # fmt: skip
        cfg = _settings(config, {**given, "log_level": log_level})

        if not cfg.admin_key:
            if not is_loopback(cfg.host):
                raise exit_with(
                    f"refusing to serve on {cfg.host} without an admin key: pass --admin-key or set ALIGHT_ADMIN_KEY "
                    "(only a loopback address gets a generated key)",
                    2,
                )
            cfg = cfg.model_copy(update={"admin_key": generate_admin_key()})
            typer.echo(f"admin key (generated, shown once): {cfg.admin_key}")
        elif run_dir is not None:
            shown = f": {cfg.admin_key}" if is_loopback(cfg.host) else ""
            typer.echo(f"admin key: the run's, `admin_key` in {run_dir / STATE_FILE}{shown}")

        logging.basicConfig(level=cfg.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        from alight_server.store.database import redacted_url

        try:
            store = open_target(StoreTarget(cfg.db_url, cfg.admin_key, cfg.data_key, run_dir))
        except (StoreError, KekError, StoreOpenError) as exc:  # StoreOpenError: a key that opens none of its keys
            raise exit_with(f"cannot open the store: {exc}") from exc
        except Exception as exc:  # bad URL, unreachable database, missing driver
            raise exit_with(
                f"cannot open the store at {redacted_url(cfg.db_url)}: {type(exc).__name__}: {exc}"
            ) from exc
        from alight_server.store.keys.upstream import UpstreamKeyError

        try:
            app = create_app(cfg, store=store)
        except UpstreamKeyError as exc:  # stored upstream keys this server's ALIGHT_SECRET_KEY cannot open
            raise exit_with(f"cannot start: {exc}") from exc
        typer.echo(f"alight server on http://{cfg.host}:{cfg.port} (store: {redacted_url(cfg.db_url)})")
        uvicorn.run(
            app,
            host=cfg.host,
            port=cfg.port,
            log_level=cfg.log_level.lower(),
            timeout_graceful_shutdown=10,  # open long-polls must not delay a restart by minutes
            http=StampedHttp,  # the gateway's response-start metric counts from the accept
        )


def _run_store(run_dir: Path, db: str | None, admin_key: str | None) -> tuple[str, str | None, str]:
    """(db, admin key, data_key) of a training run's store (stacks/run_store.py); exits on a folder that is not one
    or on a --db / --admin-key that says otherwise."""
    from alight_server.stacks.run_store import StoreOpenError, run_target
    from alight_server.stacks.state import STATE_FILE

    try:
        target = run_target(run_dir)
    except StoreOpenError as exc:
        raise exit_with(f"cannot serve --run-dir: {exc}", 2) from exc
    if db is not None and db_url(db) != target.url:
        raise exit_with(f"--run-dir serves {target.url}, the run's own store: leave out --db (ALIGHT_DB)", 2)
    if admin_key not in (None, target.admin_key):
        raise exit_with(
            f"--run-dir opens the run's store with the admin key in {run_dir / STATE_FILE}: leave out --admin-key "
            "(ALIGHT_ADMIN_KEY)",
            2,
        )
    assert target.setting is not None  # a run's target names its data_key
    return target.url, target.admin_key, target.setting


def _settings(config: Path | None, given: dict[str, Any]) -> ServerConfig:
    """The server's settings from the YAML file and the options given; exits on invalid ones."""
    from pydantic import ValidationError

    try:
        cfg = build_config(config, given)
        cfg.all_reviewer_keys()  # the key files: readable, no key in them the admin key, too short, or in both
    except (ValidationError, ValueError) as exc:
        raise exit_with(f"invalid server settings: {exc}", 2) from exc
    return cfg
