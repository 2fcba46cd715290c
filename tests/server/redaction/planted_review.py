"""Review-queue rollouts written straight into a store as the gateway and alight_sandbox.guards.report_grade write
them: one model call, a `review_flag` event with its evidence, the coding episode's `episode` event with its diff
and commands, and a final reward."""

from __future__ import annotations

from datetime import UTC, datetime

from alight.evaluation import EPISODE, REWARD_HACKING
from alight.schemas import REVIEW_FLAG, ApiFlavour, AttemptFinish, EventCreate, ModelCall, RewardCreate, RolloutCreate
from alight_server.store import Store

DIFF = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,3 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
COMMANDS = [
    {"command": "bash -lc 'cat calc.py'", "returncode": 0, "timed_out": False},
    {"command": "bash -lc 'python -m pytest -q'", "returncode": 1, "timed_out": False},
]


def plant_flagged(
    store: Store,
    rollout_id: str,
    evidence: str | None,
    *,
    diff: str = DIFF,
    hard_gate: bool = False,
    group_id: str | None = None,
    reward: float = 1.0,
) -> None:
    """A finished rollout with one call served by policy version 0, whose grade raised a review flag with
    `evidence` (None: no flag, a clean rollout), and with `hard_gate` a hard gate's violation too (which keeps it
    out of the queue)."""
    store.create_rollouts([RolloutCreate(id=rollout_id, task={"instance_id": rollout_id}, group_id=group_id)])
    store.claim_attempts(1, ids=[rollout_id])
    store.add_model_call(_call(rollout_id))
    episode = {"commands": len(COMMANDS), "command_errors": 1, "timeouts": 0, "diff_lines": 2}
    events = [
        EventCreate(
            id="episode-1", attempt=1, kind=EPISODE, payload={**episode, "diff": diff, "command_lines": COMMANDS}
        )
    ]
    if evidence is not None:
        flag = {"rule": "runner_reach", "evidence": evidence}
        events.append(EventCreate(id="flag-1", attempt=1, kind=REVIEW_FLAG, payload=flag))
    if hard_gate:
        gate = {"rule": "test_file_modified", "evidence": "tests/test_calc.py changed"}
        events.append(EventCreate(id="gate-1", attempt=1, kind=REWARD_HACKING, payload=gate))
    for event in events:
        store.add_event(rollout_id, event)
    store.add_reward(rollout_id, RewardCreate(attempt=1, value=reward, final=True))
    store.finish_attempt(rollout_id, 1, AttemptFinish(status="succeeded"))


def _call(rollout_id: str) -> ModelCall:
    reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "fixed"}, "finish_reason": "stop"}]}
    return ModelCall(
        id=f"{rollout_id}-1-0",
        rollout_id=rollout_id,
        attempt=1,
        seq=0,
        flavour=ApiFlavour.CHAT,
        request={"model": "policy", "messages": [{"role": "user", "content": "fix add()"}]},
        response=reply,
        prompt_token_ids=[1, 2],
        response_token_ids=[3, 4],
        response_logprobs=[-0.5, -0.25],
        policy_version=0,
        status_code=200,
        created_at=datetime.now(UTC),
    )
