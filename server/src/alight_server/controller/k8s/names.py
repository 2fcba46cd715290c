"""Deterministic Kubernetes names and labels for an attempt: the same attempt always maps to the same Job."""

from __future__ import annotations

import hashlib
import re

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "alight"
RUNNER_LABEL = "alight.dev/runner"
ROLLOUT_LABEL = "alight.dev/rollout"  # a label-safe form of the rollout id; the exact id is an annotation
ATTEMPT_LABEL = "alight.dev/attempt"
ROLE_LABEL = "alight.dev/role"  # "agent" on every attempt Pod: what the NetworkPolicy selects
ROLE_AGENT = "agent"
HANDLE_ANNOTATION = "alight.dev/handle"

NAME_LIMIT = 63  # a Job's name is copied into its Pods' `job-name` label, and label values stop at 63
LABEL_VALUE_LIMIT = 63
HASH_CHARS = 10


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_CHARS]


def _slug(text: str) -> str:
    """Lowercase alphanumerics and single dashes, as DNS-1123 labels allow."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", text.lower())).strip("-")


def job_name(runner_name: str, rollout_id: str, attempt: int) -> str:
    """`alight-<readable part of the rollout id>-<attempt>-<hash>`, a DNS-1123 label of at most 63 chars; the hash
    (of runner name and exact id) keeps ids that slug the same, or two controllers in a namespace, apart."""
    suffix = f"-{attempt}-{_digest(f'{runner_name}/{rollout_id}/{attempt}')}"
    readable = _slug(rollout_id)[: NAME_LIMIT - len("alight-") - len(suffix)].strip("-")
    return f"alight-{readable}{suffix}" if readable else f"alight{suffix}"


def label_value(text: str) -> str:
    """`text` when it is a valid label value, else a slug cut to fit plus a hash (never empty)."""
    if len(text) <= LABEL_VALUE_LIMIT and re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", text):
        return text
    return f"{_slug(text)[: LABEL_VALUE_LIMIT - HASH_CHARS - 1]}-{_digest(text)}".lstrip("-")


def runner_selector(runner_name: str) -> str:
    """The label selector for every object this runner made (and nothing another controller made)."""
    return f"{MANAGED_BY}={MANAGED_BY_VALUE},{RUNNER_LABEL}={label_value(runner_name)}"


def attempt_labels(runner_name: str, rollout_id: str, attempt: int) -> dict[str, str]:
    return {
        MANAGED_BY: MANAGED_BY_VALUE,
        RUNNER_LABEL: label_value(runner_name),
        ROLLOUT_LABEL: label_value(rollout_id),
        ATTEMPT_LABEL: str(attempt),
        ROLE_LABEL: ROLE_AGENT,
    }
