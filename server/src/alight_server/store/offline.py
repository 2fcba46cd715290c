"""Offline rollouts: ones that ran elsewhere (imported traces), stored already ended so no controller starts them."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select

from alight.schemas import AttemptStatus, Rollout, RolloutCreate, RolloutState, attempt_handle
from alight_server.store import rows
from alight_server.store import tables as t
from alight_server.store.base import Conflict
from alight_server.store.browse import SqlRolloutListing

OFFLINE_RUNNER = "offline"  # the runner named in an offline attempt's handle: `offline/<rollout id>/1`


class SqlOfflineRollouts(SqlRolloutListing):
    def add_offline_rollouts(self, items: Sequence[RolloutCreate]) -> list[tuple[Rollout, bool]]:
        """Create each rollout ended (succeeded) with one succeeded attempt, in one transaction; never claimable.

        Idempotent per id like `create_rollouts`: an existing id with the same body is returned with False
        (not new), a different body is a Conflict. The state machine is not walked: nothing ran here.
        """
        if any(item.id is None for item in items):
            raise ValueError("offline rollouts need caller-chosen ids (deterministic from the imported content)")
        ids = [str(item.id) for item in items]
        with self._write() as conn:
            c = t.rollouts.c
            existing = dict(conn.execute(select(c.id, c.body_hash).where(c.id.in_(ids))).tuples().all())
            created: set[str] = set()
            policy, now = self.current_policy_version(conn), rows.now()
            for rid, item in zip(ids, items, strict=True):
                digest = rows.body_hash(item)
                if rid in existing:
                    if existing[rid] != digest:
                        raise Conflict(f"rollout {rid!r} already exists with a different body; import under a new name")
                    continue
                existing[rid] = digest
                created.add(rid)
                self._insert_rollout(
                    conn,
                    item,
                    now,
                    id=rid,
                    body_hash=digest,
                    policy_version=policy,
                    runner=None,
                    state=RolloutState.SUCCEEDED,
                    claimable=False,
                    attempt_count=1,
                )
                attempt = rows.values(
                    t.attempts,
                    sealer=self.sealer,
                    rollout_id=rid,
                    attempt=1,
                    status=AttemptStatus.SUCCEEDED,
                    started_at=now,
                    ended_at=now,
                    runner_handle=attempt_handle(OFFLINE_RUNNER, rid, 1),
                    ended_by_transition=False,
                )
                conn.execute(t.attempts.insert().values(attempt))
            by_id = self._by_ids(conn, list(dict.fromkeys(ids)))
        return [(by_id[rid], rid in created) for rid in ids]
