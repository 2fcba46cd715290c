"""`alight eval` (and the probe of `alight data clean`) run the policy on the stack a training run would get."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from alight.schemas import Mode
from alight_server.evaluation.policy import run_rollouts
from alight_server.trainer.config.run import parse_config
from alight_testing.tiny_run import tiny_run_config

pytestmark = pytest.mark.timeout(300)

AGENT = Path(__file__).parent / "agents" / "unscored_agent.py"


def test_eval_rewards_come_from_the_config_s_evaluator_as_in_training(tmp_path: Path) -> None:
    tasks = [{"word": "strawberry"}, {"word": "kiwi"}]
    raw = tiny_run_config(tmp_path, f"{AGENT}:main", tasks, evaluator=f"{AGENT}:score", controller={"concurrency": 2})
    # The agent asks for model "policy": priced per token as an external upstream would be, plus sandbox time.
    raw["prices"] = {"tokens": {"policy": {"prompt": 3.0, "completion": 15.0}}, "sandbox_second": 0.001}
    report, scores = run_rollouts(parse_config(raw, tmp_path), "eval", tasks, 1, Mode.VAL)
    assert scores == [[1.0], [0.4]], report
    # The cost of both rollouts (the failure included) over the one success, from the tokens the report counts
    cost = report.cost
    assert (cost["successes"], cost["total"]["prompt_tokens"]) == (1, report.prompt_tokens)
    sandbox_s = cost["total"]["sandbox_seconds"]
    assert 0 < sandbox_s < 300 and cost["total"]["model_seconds"] > 0
    usd = (report.prompt_tokens * 3.0 + report.completion_tokens * 15.0) / 1e6 + sandbox_s * 0.001
    assert math.isclose(cost["per_success"]["usd"], usd, rel_tol=1e-9)
    assert cost["per_success"]["tokens"] == report.prompt_tokens + report.completion_tokens
    assert any(line.startswith("  per success") and "$" in line for line in report.lines())
