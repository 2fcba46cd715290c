"""The `kubernetes` client, imported lazily, and the API configuration: kubeconfig, in-cluster, or given."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

INSTALL_HINT = "pip install 'alight-server[k8s]'"
EXTRA = "k8s"  # the extra in server/pyproject.toml that INSTALL_HINT names (a test checks it exists)
IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def kubernetes_client() -> Any:
    """The `kubernetes.client` module, or ImportError with the pip command that installs it."""
    try:
        from kubernetes import client
    except ImportError as exc:
        raise ImportError(f"the Kubernetes runner needs the kubernetes client; {INSTALL_HINT}") from exc
    return client


def load_configuration(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """A client Configuration: the kubeconfig (path, $KUBECONFIG or ~/.kube/config), else the in-cluster account."""
    configuration = kubernetes_client().Configuration()  # its ImportError names the extra
    from kubernetes import config

    try:
        config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
    except config.ConfigException as exc:
        if kubeconfig is not None or context is not None:
            raise ValueError(f"cannot load kubeconfig {kubeconfig or '(default)'} context {context}: {exc}") from exc
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException as in_cluster:
            raise ValueError(
                f"no Kubernetes configuration found: no kubeconfig ({exc}) and not in a cluster ({in_cluster}); "
                "pass --kubeconfig or run the controller in a Pod with a service account"
            ) from in_cluster
    return configuration


def default_namespace(kubeconfig: str | None = None, context: str | None = None) -> str:
    """The namespace of the kubeconfig's context, or the Pod's own namespace in a cluster, or `default`."""
    from kubernetes import config

    with contextlib.suppress(config.ConfigException, OSError):
        found: Any = config.list_kube_config_contexts(config_file=kubeconfig)
        contexts, active = found
        if context is not None:
            active = next((c for c in contexts if c["name"] == context), active)
        if namespace := (active or {}).get("context", {}).get("namespace"):
            return namespace
    if IN_CLUSTER_NAMESPACE.exists():
        return IN_CLUSTER_NAMESPACE.read_text().strip()
    return "default"
