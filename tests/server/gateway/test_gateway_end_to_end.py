"""The gateway with the rest of the server, over HTTP only: register, create, claim, call, read the trajectory."""

from __future__ import annotations

import openai

from alight.client import AlightClient
from alight.schemas import RolloutCreate, UpstreamCreate


def test_claimed_attempt_calls_through_its_gateway_url_and_shows_in_the_trajectory(live_server, upstream, fake):
    with AlightClient(live_server.url, admin_key=live_server.admin_key) as admin:
        admin.add_upstream(UpstreamCreate(id="main", url=upstream.url, model=upstream.model))
        [rollout] = admin.create_rollouts([RolloutCreate(task={"q": "2+2"})])
        [start] = admin.claim_attempts(limit=1, ids=[rollout.id])
        agent = openai.OpenAI(base_url=start.gateway_base_url, api_key=start.token, max_retries=0)
        reply = agent.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "2+2?"}])
        trajectory = admin.trajectory(rollout.id, start.attempt, reveal=True)  # as the trainer reads it
    [step] = trajectory.calls
    produced = fake.calls[-1].response
    assert reply.choices[0].message.content == produced["choices"][0]["message"]["content"]
    assert step.call.upstream == "main"
    assert step.call.response_token_ids == produced["choices"][0]["token_ids"]
    assert step.call.prompt_token_ids == produced["prompt_token_ids"]
