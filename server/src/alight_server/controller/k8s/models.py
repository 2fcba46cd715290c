"""Check a JSON-shaped Kubernetes object against the `kubernetes` client's models, naming any field they do not know."""

from __future__ import annotations

from typing import Any

from alight_server.controller.k8s.kube import kubernetes_client

# Free-form maps: the models keep whatever keys they hold.
FREE_FORM = (".labels", ".annotations", ".data", ".stringData", ".nodeSelector", ".matchLabels", ".limits", ".requests")


def check_object(obj: dict[str, Any], model: str) -> Any:
    """The `kubernetes.client` model (e.g. "V1Job") built from obj; ValueError naming what is wrong or unknown.

    The models drop fields they do not know, so a typo (`contianers`) would pass silently; comparing the input with
    the model's own dict catches it.
    """
    client = kubernetes_client()
    cls = getattr(client, model)
    try:
        built = cls.from_dict(obj)
    except Exception as exc:  # pydantic's ValidationError, or a TypeError on a wrong shape
        raise ValueError(f"not a valid {model.removeprefix('V1')}: {exc}") from exc
    if unknown := _unknown_fields(obj, built.to_dict(serialize=True), ""):
        raise ValueError(f"not a valid {model.removeprefix('V1')}: unknown field(s) {', '.join(unknown)}")
    return built


def _unknown_fields(given: Any, known: Any, path: str) -> list[str]:
    if isinstance(given, dict) and isinstance(known, dict):
        if path.endswith(FREE_FORM):
            return []
        found = []
        for key, value in given.items():
            if value is None:
                continue
            if key not in known:
                found.append(f"{path}.{key}".lstrip("."))
            else:
                found.extend(_unknown_fields(value, known[key], f"{path}.{key}"))
        return found
    if isinstance(given, list) and isinstance(known, list):
        return [
            f for i, (g, k) in enumerate(zip(given, known, strict=False)) for f in _unknown_fields(g, k, f"{path}[{i}]")
        ]
    return []
