"""The sample builder as the dashboard runs it: the run's settings, its tokenizer for text, and the install hint."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

from alight.schemas import Rollout
from alight_server.store import NotFound, Store
from alight_server.trainer.config.sections import SamplesConfig

log = logging.getLogger("alight.server")

TRAIN_HINT = (
    "the token view and capture health run the sample builder, which needs torch: pip install 'alight-server[train]'"
)


class NeedsTrainExtra(Exception):
    """torch (the sample builder's batch tensors) is not installed here."""


def run_of(store: Store, rollout: Rollout) -> Any:
    """The run that created this rollout (trainer ids start with `<run id>-`), or None."""
    run_id = rollout.id.split("-", 1)[0]
    try:
        return store.get_run(run_id)
    except NotFound:
        return None


def run_policies(run_config: dict[str, Any] | None) -> dict[str, str | None]:
    """The run's policies in config order, each with its named reward (`policies.NAME.reward`); {} for one policy."""
    policies = (run_config or {}).get("policies")
    if not isinstance(policies, dict):
        return {}
    return {
        str(name): reward if isinstance(reward := (spec or {}).get("reward"), str) else None
        for name, spec in policies.items()
        if isinstance(spec, dict) or spec is None
    }


def samples_section(run_config: dict[str, Any] | None) -> SamplesConfig:
    """The run's `samples:` section as it trained with it; the defaults without a run."""
    samples = (run_config or {}).get("samples")
    if samples is None:  # runs recorded before the sample builder got its own section kept it under algorithm
        old = (run_config or {}).get("algorithm") or {}
        samples = {**old, "mode": old.get("sample_mode", "trajectory")}
    known = {key: value for key, value in samples.items() if key in SamplesConfig.model_fields}
    return SamplesConfig.model_validate(known)


def sample_config(run_config: dict[str, Any] | None) -> Any:
    """The sample builder's settings the run trained with: its own `samples:` section; the defaults without a run."""
    try:
        from alight_server.trainer.step.samples import SampleConfig
    except ImportError as exc:
        raise NeedsTrainExtra(TRAIN_HINT) from exc
    # every break, so each row can say why it started
    return SampleConfig.from_section(samples_section(run_config), max_break_examples=1_000_000)


def model_name(store: Store, run_config: dict[str, Any] | None, upstream_ids: Sequence[str | None] = ()) -> str | None:
    """The policy's model: the run's `model`, else the model of the upstream that served the calls."""
    if run_config and run_config.get("model"):
        return str(run_config["model"])
    served = {u.id: u.model for u in store.list_upstreams()}
    return next((model for u in upstream_ids if u is not None and (model := served.get(u))), None)


def decoder(model: str | None) -> Callable[[Sequence[int]], str] | None:
    """`tokenizer.decode` of the model when its tokenizer loads here; None otherwise (ids are shown)."""
    tokenizer = _tokenizer(model) if model else None
    return tokenizer.decode if tokenizer is not None else None


def token_texts(model: str | None, ids: Sequence[int]) -> list[str] | None:
    tokenizer = _tokenizer(model) if model else None
    return tokenizer.batch_decode([[i] for i in ids]) if tokenizer is not None else None


@functools.lru_cache(maxsize=4)
def _tokenizer(model: str) -> Any:
    try:
        from transformers import AutoTokenizer

        from alight_server.inference.models import resolve_model

        return AutoTokenizer.from_pretrained(str(resolve_model(model)))
    except Exception as exc:  # no transformers, an unknown model, no network for a hub name
        log.warning("dashboard: no tokenizer for %r (%s); tokens are shown as ids", model, exc)
        return None
