"""`alight eval` (and the probe of `alight data clean`) run the policy on the stack a training run would get."""

from __future__ import annotations

from pathlib import Path

import pytest

from alight.schemas import Mode
from alight_server.evaluation.policy import run_rollouts
from alight_server.trainer.config.run import parse_config
from alight_testing.tiny_run import tiny_run_config

pytestmark = pytest.mark.timeout(300)

AGENT = Path(__file__).parent / "agents" / "unscored_agent.py"


def test_eval_rewards_come_from_the_config_s_evaluator_as_in_training(tmp_path: Path) -> None:
    tasks = [{"word": "apple"}, {"word": "kiwi"}]
    raw = tiny_run_config(tmp_path, f"{AGENT}:main", tasks, evaluator=f"{AGENT}:score", controller={"concurrency": 2})
    report, scores = run_rollouts(parse_config(raw, tmp_path), "eval", tasks, 1, Mode.VAL)
    assert scores == [[0.5], [0.4]], report
