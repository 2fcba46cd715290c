"""`alight controller`: run the server's queued attempts on this machine (local) or as Kubernetes Jobs (k8s)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import typer

from alight.commands.exits import exit_with
from alight_server.commands.options import (
    LogLevelOption,
    RequiredAdminKeyOption,
    RequiredServerOption,
    TrainingConfigOption,
)
from alight_server.commands.train import training_config

RUNNERS = ("local", "k8s")


def _log_seal(admin_key: str) -> Any:
    """What seals ended attempts' logs: the KEK of ALIGHT_DATA_KEY, else ALIGHT_SECRET_KEY, else the admin key's."""
    from alight_server.store.keys.kek import KekError, KekSource
    from alight_server.store.keys.sealed_logs import LogSeal

    try:
        return LogSeal(KekSource.default(admin_key))
    except KekError as exc:
        raise exit_with(f"cannot seal attempt logs: {exc}") from exc


def register(app: typer.Typer) -> None:
    app.command("controller")(controller)


def controller(
    server: RequiredServerOption,
    admin_key: RequiredAdminKeyOption,
    runner: str = typer.Option("local", "--runner", help="Where attempts run: local (subprocesses) or k8s (Jobs)."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Attempts running at once, at most."),
    logs_dir: Path = typer.Option(
        Path(".alight/logs"), "--logs-dir", envvar="ALIGHT_LOGS_DIR", help="Captured output and attempt state."
    ),
    name: str | None = typer.Option(
        None,
        "--name",
        help="Runner name in attempt handles (default local@HOST, k8s@NAMESPACE); unique per controller.",
    ),
    namespace: str | None = typer.Option(
        None, "--namespace", envvar="ALIGHT_K8S_NAMESPACE", help="k8s: where Jobs run (default: the context's)."
    ),
    job_template: Path | None = typer.Option(
        None, "--job-template", help="k8s: a Job YAML with placeholders (docs/controller.md)."
    ),
    image: str | None = typer.Option(None, "--image", help="k8s: the agent image when a rollout names none."),
    kubeconfig: str | None = typer.Option(None, "--kubeconfig", help="k8s: kubeconfig file (default: in-cluster)."),
    context: str | None = typer.Option(None, "--context", help="k8s: kubeconfig context."),
    job_ttl: int = typer.Option(3600, "--job-ttl", min=0, help="k8s: seconds a finished Job is kept."),
    unschedulable_limit: float = typer.Option(
        300.0, "--unschedulable-limit", min=0, help="k8s: seconds a Pod may stay unschedulable (then infra)."
    ),
    creation_rate: float = typer.Option(5.0, "--creation-rate", min=0.01, help="k8s: Jobs created per second."),
    config: TrainingConfigOption = None,
    allow_unpinned_images: bool = typer.Option(
        False, "--allow-unpinned-images", help="k8s: run images given by tag, not only name@sha256:DIGEST."
    ),
    image_scan: str | None = typer.Option(
        None,
        "--image-scan",
        help="k8s: a scanner run once per image before its first Job; e.g. 'trivy image "
        "--exit-code 1 {image}'. Non-zero exit, timeout or a missing binary refuses the image.",
    ),
    image_scan_timeout: float | None = typer.Option(
        None, "--image-scan-timeout", min=1, help="k8s: seconds per scan (default 600)."
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
    log_level: LogLevelOption = "info",
) -> None:
    """Claim queued attempts from the server, run them, and report how they ended."""
    try:
        from alight_server.controller.local import LocalRunner
        from alight_server.controller.loop import Controller
    except ImportError as exc:
        raise exit_with(f"alight controller needs the server package ({exc}); pip install alight-server") from exc

    if runner not in RUNNERS:
        raise exit_with(f"unknown --runner {runner!r}; choose one of {', '.join(RUNNERS)}", 2)
    level = (log_level or "info").lower()
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if level != "debug":
        logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request drowns the attempt lines
    client = _connected_client(server, admin_key)
    if runner == "k8s":
        options = {"namespace": namespace, "job_template": job_template, "image": image, "kubeconfig": kubeconfig,
                   "context": context, "job_ttl": job_ttl, "unschedulable_limit": unschedulable_limit,
                   "creation_rate": creation_rate, "kill_grace": kill_grace, "scan_cache": logs_dir / "image-scans",
                   **image_settings(config, allow_unpinned_images, image_scan, image_scan_timeout)}  # fmt: skip
        chosen: Any = _k8s_runner(name, agent_server_url, options)
        where = f"Jobs in namespace {chosen.namespace}"
    else:
        chosen = LocalRunner(logs_dir, name=name, agent_server_url=agent_server_url, log_seal=_log_seal(admin_key))
        where = f"logs in {chosen.logs_dir}"
    loop = Controller(
        client, chosen, concurrency=concurrency, poll_interval=poll_interval, kill_grace_s=kill_grace,
        kill_on_stop=not keep_running,
    )  # fmt: skip
    typer.echo(f"controller {chosen.name}: {server}, up to {concurrency} attempts, {where}")
    loop.run()


def image_settings(config: Path | None, allow: bool, scan: str | None, timeout: float | None) -> dict[str, Any]:
    """The k8s runner's image rules: the training config's `controller.allow_unpinned_images` and `controller.images`
    (trainer/config/images.py), each overridden by its flag where given; without a config, the flags alone."""
    from alight_server.trainer.config.images import ImageSettings

    allowed, images = False, ImageSettings()
    if config is not None:
        section = training_config(config, command="alight controller").controller
        allowed, images = section.allow_unpinned_images, section.images
    return {"allow_unpinned_images": allow or allowed, "image_scan": scan or images.scan,
            "image_scan_timeout": timeout or images.scan_timeout_s}  # fmt: skip


def _connected_client(server: str, admin_key: str) -> Any:
    """A client of the server, checked with one request: a wrong URL or key exits now, with a clear line."""
    from alight.api_models import RolloutQuery
    from alight.client import AlightClient, ApiError

    client = AlightClient(server, admin_key=admin_key)
    try:
        client.list_rollouts(RolloutQuery(limit=1))
    except ApiError as exc:  # the server answered
        raise exit_with(f"the server at {server} refused the admin key: {exc}") from exc
    except Exception as exc:  # it did not
        raise exit_with(f"cannot reach the alight server at {server}: {exc}") from exc
    return client


def _k8s_runner(name: str | None, agent_server_url: str | None, options: dict[str, Any]) -> Any:
    """The Kubernetes runner from the command's options, after its preflight; exits with one line per problem."""
    try:
        from alight_server.controller import k8s
        from alight_server.controller.k8s.kube import default_namespace, kubernetes_client
    except ImportError as exc:
        raise exit_with(str(exc)) from exc
    try:
        kubernetes_client()
        configuration = k8s.load_configuration(options["kubeconfig"], options["context"])
        template = k8s.JobTemplate.load(options["job_template"]) if options["job_template"] else None
        scan_args = (options["image_scan"], options["image_scan_timeout"], options["scan_cache"])
        scan = k8s.ImageScan(*scan_args) if options["image_scan"] else None
        namespace = options["namespace"] or default_namespace(options["kubeconfig"], options["context"])
        runner = k8s.KubernetesRunner(
            namespace,
            configuration=configuration,
            template=template,
            image=options["image"],
            name=name,
            agent_server_url=agent_server_url,
            ttl_after_finished_s=options["job_ttl"],
            termination_grace_s=max(1, round(options["kill_grace"])),
            limits=k8s.Limits(unschedulable_s=options["unschedulable_limit"]),
            creations_per_s=options["creation_rate"],
            allow_unpinned_images=options["allow_unpinned_images"],
            image_scan=scan,
        )
    except (ImportError, ValueError) as exc:
        raise exit_with(str(exc)) from exc
    if problems := k8s.preflight(runner):
        for problem in problems:
            typer.echo(f"preflight: {problem}", err=True)
        runner.close()
        raise typer.Exit(1)
    return runner
