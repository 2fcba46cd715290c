"""A real sample batch for the verl backend tests, and the skip every verl test takes when verl is absent."""
# pyright: reportMissingImports=false
# (verl and omegaconf live in their own venv, .venv-verl; the type check runs in .venv)

from __future__ import annotations

import pytest
from samples_fixtures import model_call, trajectory

from alight_server.trainer.step.samples import SampleBatch, build_samples

# The exact commands; the `verl` marker selects these tests (CI's default venv has no verl: they skip there).
VERL_COMMAND = (
    "bash scripts/setup.sh --verl && .venv-verl/bin/pytest -q -p no:cacheprovider -m verl tests/server/trainer"
)


def require_verl() -> None:
    pytest.importorskip("verl", reason=f"verl is not installed; run: {VERL_COMMAND}")


def _two_turns(rollout: str, first: list[int], second: list[int], reward: float, group: str):
    """A tool-using rollout: the second prompt extends the first call's prompt + response (one merged row)."""
    call0 = model_call(0, [1, 2, 3], first, rollout_id=rollout)
    call1 = model_call(1, [1, 2, 3, *first, 20, 21], second, rollout_id=rollout)
    return trajectory([call0, call1], rollout_id=rollout, group_id=group, reward=reward)


def _rewritten(rollout: str, reward: float, group: str):
    """The second prompt rewrites the history: two rows of one rollout."""
    call0 = model_call(0, [1, 2, 3, 4], [10, 11, 12], rollout_id=rollout)
    call1 = model_call(1, [1, 30, 31], [13], rollout_id=rollout)
    return trajectory([call0, call1], rollout_id=rollout, group_id=group, reward=reward)


def real_batch() -> SampleBatch:
    """Two groups from the real sample builder: merged multi-turn rows with masked tool results, a
    rollout with two rows, unequal prompt and response lengths, and a rollout with a reward but no
    row (it still counts in its group's statistics)."""
    trajectories = [
        _two_turns("a1", [10, 11], [12, 13, 14], 1.0, "g1"),
        _rewritten("a2", 0.0, "g1"),
        _two_turns("a3", [15], [16], 0.5, "g1"),
        trajectory([], rollout_id="a4", group_id="g1", reward=0.25),  # no model call: no row
        _two_turns("b1", [17, 18, 19], [20], 0.0, "g2"),
        _rewritten("b2", 1.0, "g2"),
    ]
    batch, _ = build_samples(trajectories)
    return batch


def train_config(tmp_path, **sections):
    """A TrainConfig (the tiny model) with `sections` merged in: train_config(p, algorithm={"kl_coef": 0.1})."""
    from alight_server.trainer.config.run import parse_config

    raw = {
        "model": "tiny",
        "dataset": {"train": "train.jsonl"},
        "agent": {"entrypoint": "agent.py:main"},
        "group_size": 4,
        "tasks_per_step": 8,
        "output_dir": str(tmp_path / "run"),
    }
    for key, value in sections.items():
        raw[key] = {**raw.get(key, {}), **value} if isinstance(value, dict) else value
    return parse_config(raw, tmp_path)


def actor_config(tmp_path, clip_low: float = 0.2, clip_high: float = 0.28):
    """verl's ActorConfig dataclass as the backend builds it: the translated config, through verl's converter."""
    from verl.utils.config import omega_conf_to_dataclass

    from alight_server.trainer.backends.verl.config import verl_config
    from alight_server.trainer.backends.verl.settings import VerlSettings

    config = train_config(tmp_path, algorithm={"clip_low": clip_low, "clip_high": clip_high})
    return omega_conf_to_dataclass(verl_config(config, VerlSettings(), "/models/policy").actor_rollout_ref.actor)
