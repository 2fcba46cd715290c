"""A rollout's runner env over HTTP: every admin and dashboard answer masks the values; the claim carries them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import httpx

from alight_server.store.runner_env import MASK

if TYPE_CHECKING:
    from tests.server.api.conftest import Claim, Create

SECRETS = {"HF_TOKEN": "hf_never-answered-31", "DB_PASSWORD": "pw-never-answered-58"}
RUNNER = {"command": ["agent"], "env": SECRETS, "inherit_env": ["AWS_*"]}


def test_admin_and_dashboard_reads_answer_the_runner_env_masked(
    admin_client: httpx.Client, create: Create, claim: Claim
) -> None:
    (created,) = create({"id": "r-env", "runner": RUNNER})
    claim("r-env")  # the dashboard's view shows a rollout with an attempt
    answers = [json.dumps(created)]
    for path in ("/api/rollouts/r-env", "/api/rollouts", "/api/ui/rollouts", "/api/ui/rollouts/r-env/view"):
        response = admin_client.get(path)
        assert response.status_code == 200, response.text
        answers.append(response.text)
    assert not any(value in answer for value in SECRETS.values() for answer in answers)
    runner = admin_client.get("/api/rollouts/r-env").json()["runner"]
    assert runner["env"] == dict.fromkeys(SECRETS, MASK) and runner["inherit_env"] == ["AWS_*"]


def test_the_claim_carries_the_runner_env_values_to_the_controller(create: Create, claim: Claim) -> None:
    create({"id": "r-env", "runner": RUNNER})
    assert claim("r-env")["rollout"]["runner"]["env"] == SECRETS
