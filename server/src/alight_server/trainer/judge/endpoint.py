"""Where the judge is served: a frozen policy of the run, an upstream registered with the server, or a URL."""

from __future__ import annotations

import os
from pathlib import Path

from alight.client import AlightClient
from alight.schemas import Upstream
from alight_server.trainer.judge.caller import Endpoint
from alight_server.trainer.judge.config import JudgeConfig

POLICY_UPSTREAM = "embedded-policy"  # the id the run's own stack registers its inference server under


def _key(upstream: Upstream) -> str:
    if upstream.api_key_file is not None:
        return Path(upstream.api_key_file).read_text().strip()
    if upstream.api_key_env is not None and upstream.api_key_env in os.environ:
        return os.environ[upstream.api_key_env]
    raise ValueError(
        f"judge: upstream {upstream.id!r} keeps its key sealed in the server (or names an unset variable); the "
        "trainer calls the judge itself, so register it with api_key_file or api_key_env, or use judge.url + key_file"
    )


def resolve_endpoint(config: JudgeConfig, client: AlightClient) -> Endpoint:
    """The judge's endpoint; ValueError naming what to fix when the config points nowhere."""
    if config.url is not None and config.key_file is not None:
        return Endpoint(config.url, Path(config.key_file).read_text().strip(), config.served_model or "judge")
    wanted = config.upstream if config.upstream is not None else POLICY_UPSTREAM
    upstreams = {u.id: u for u in client.list_upstreams()}
    if wanted not in upstreams:
        what = "the run's policy server" if config.model is not None else f"upstream {wanted!r}"
        raise ValueError(f"judge: {what} is not registered with the server (it has {sorted(upstreams) or 'none'})")
    upstream = upstreams[wanted]
    return Endpoint(upstream.url, _key(upstream), config.served_model or config.model or upstream.model or "judge")
