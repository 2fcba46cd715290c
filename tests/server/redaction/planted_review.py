"""Review-queue rollouts written straight into a store as alight_sandbox.guards.report_grade writes them: a
`review_flag` event with its evidence and the coding episode's `episode` event with its diff and commands."""

from __future__ import annotations

from alight.evaluation import EPISODE, REWARD_HACKING
from alight.schemas import REVIEW_FLAG, AttemptFinish, EventCreate, RewardCreate, RolloutCreate
from alight_server.store import Store

DIFF = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,3 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
COMMANDS = [
    {"command": "bash -lc 'cat calc.py'", "returncode": 0, "timed_out": False},
    {"command": "bash -lc 'python -m pytest -q'", "returncode": 1, "timed_out": False},
]


def plant_flagged(store: Store, rollout_id: str, evidence: str, *, diff: str = DIFF, hard_gate: bool = False) -> None:
    """A finished rollout (reward 1) whose grade raised a review flag with `evidence` (and, with `hard_gate`, a
    hard gate's violation too, which keeps it out of the queue)."""
    store.create_rollouts([RolloutCreate(id=rollout_id, task={"instance_id": rollout_id})])
    store.claim_attempts(1, ids=[rollout_id])
    episode = {"commands": len(COMMANDS), "command_errors": 1, "timeouts": 0, "diff_lines": 2}
    events = [
        EventCreate(
            id="episode-1", attempt=1, kind=EPISODE, payload={**episode, "diff": diff, "command_lines": COMMANDS}
        ),
        EventCreate(id="flag-1", attempt=1, kind=REVIEW_FLAG, payload={"rule": "runner_reach", "evidence": evidence}),
    ]
    if hard_gate:
        gate = {"rule": "test_file_modified", "evidence": "tests/test_calc.py changed"}
        events.append(EventCreate(id="gate-1", attempt=1, kind=REWARD_HACKING, payload=gate))
    for event in events:
        store.add_event(rollout_id, event)
    store.add_reward(rollout_id, RewardCreate(attempt=1, value=1.0, final=True))
    store.finish_attempt(rollout_id, 1, AttemptFinish(status="succeeded"))
