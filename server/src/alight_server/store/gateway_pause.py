"""The gateway's shared pause (every gateway process on one store pauses, drains and resumes together, for all
policies or one), and the one read with which each gateway follows the store."""

from __future__ import annotations

from sqlalchemy import Connection, bindparam, select, update

from alight.schemas import GatewayPause, GatewayReplica, GatewaySync
from alight_server.store import rows
from alight_server.store import tables as t
from alight_server.store.database import SqlDatabase

_PAUSED, _EPOCH, _ROLLOUT_SEQ = "gateway_paused", "gateway_pause_epoch", "rollout_seq"
_FOLLOWED = select(t.counters.c.name, t.counters.c.value).where(t.counters.c.name.in_((_PAUSED, _EPOCH, _ROLLOUT_SEQ)))
_PAUSED_POLICIES = select(t.gateway_paused_policies.c.policy).order_by(t.gateway_paused_policies.c.policy)
# A sync that finds more changes than this drops every cached rollout instead of listing them.
MAX_CHANGED = 1000
_CHANGED = (
    select(t.rollouts.c.id)
    .where(t.rollouts.c.seq > bindparam("since"), t.rollouts.c.seq <= bindparam("upto"))
    .order_by(t.rollouts.c.seq)
    .limit(MAX_CHANGED + 1)
)


def _pause(conn: Connection, values: dict[str, int] | None = None) -> GatewayPause:
    """The pause as the counters `values` (read here when not given) and the paused policies say."""
    values = values or dict(conn.execute(_FOLLOWED).tuples().all())
    policies = list(conn.execute(_PAUSED_POLICIES).scalars())
    return GatewayPause(paused=bool(values[_PAUSED]), epoch=int(values[_EPOCH]), policies=policies)


class SqlGatewayReplicas(SqlDatabase):
    def gateway_pause(self) -> GatewayPause:
        with self._read() as conn:
            return _pause(conn)

    def gateway_sync(self, since_seq: int | None) -> GatewaySync:
        """The rollout seq is read first: seq order is commit order (tables.py), so every change up to it has
        committed and the list that follows misses none, whatever the isolation."""
        with self._read() as conn:
            values = dict(conn.execute(_FOLLOWED).tuples().all())
            upto = int(values[_ROLLOUT_SEQ])
            changed: list[str] | None = None
            if since_seq is not None:
                changed = list(conn.execute(_CHANGED, {"since": since_seq, "upto": upto}).scalars())
                if len(changed) > MAX_CHANGED:
                    changed = None
            version = self.current_policy_version(conn)
            pause = _pause(conn, values)
        return GatewaySync(pause=pause, policy_version=version, rollout_seq=upto, changed=changed)

    def set_gateway_paused(self, paused: bool, policy: str | None = None) -> GatewayPause:
        with self._write() as conn:
            c = t.counters.c
            if policy is None:
                flag = conn.execute(select(c.value).where(c.name == _PAUSED).with_for_update()).scalar_one()
                if bool(flag) != paused:
                    conn.execute(update(t.counters).where(c.name == _PAUSED).values(value=int(paused)))
                    self._bump(conn, _EPOCH)
            else:
                # The epoch's row lock orders policy pauses (a global one locks the flag first, then the epoch).
                conn.execute(select(c.value).where(c.name == _EPOCH).with_for_update()).scalar_one()
                held = t.gateway_paused_policies
                found = conn.execute(select(held.c.policy).where(held.c.policy == policy)).first() is not None
                if found != paused:
                    conn.execute(
                        held.insert().values(policy=policy) if paused else held.delete().where(held.c.policy == policy)
                    )
                    self._bump(conn, _EPOCH)
            return _pause(conn)

    def report_gateway_replica(self, replica: GatewayReplica) -> None:
        values = rows.values(t.gateway_replicas, replica)
        stmt = self._upsert(t.gateway_replicas)
        stmt = stmt.on_conflict_do_update(index_elements=["id"], set_={k: stmt.excluded[k] for k in values})
        per_policy = t.gateway_replica_policies
        with self._write() as conn:
            conn.execute(stmt, values)
            conn.execute(per_policy.delete().where(per_policy.c.replica_id == replica.id))
            if replica.in_flight_by_policy:
                counts = sorted(replica.in_flight_by_policy.items())
                conn.execute(
                    per_policy.insert(), [{"replica_id": replica.id, "policy": p, "in_flight": n} for p, n in counts]
                )

    def list_gateway_replicas(self) -> list[GatewayReplica]:
        with self._read() as conn:
            per_policy: dict[str, dict[str, int]] = {}
            for replica_id, policy, in_flight in conn.execute(select(t.gateway_replica_policies)).tuples():
                per_policy.setdefault(replica_id, {})[policy] = in_flight
            found = conn.execute(select(t.gateway_replicas).order_by(t.gateway_replicas.c.id))
            return [
                rows.from_row(GatewayReplica, t.gateway_replicas, row, in_flight_by_policy=per_policy.get(row.id, {}))
                for row in found
            ]

    def remove_gateway_replica(self, replica_id: str) -> None:
        with self._write() as conn:
            conn.execute(t.gateway_replicas.delete().where(t.gateway_replicas.c.id == replica_id))
            per_policy = t.gateway_replica_policies
            conn.execute(per_policy.delete().where(per_policy.c.replica_id == replica_id))
