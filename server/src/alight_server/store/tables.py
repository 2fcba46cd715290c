"""The store's SQL schema (SQLAlchemy Core tables) and its version number."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

# Bump when a table changes, and teach SqlStore to migrate from the previous version
# (a new table needs no bump: opening the store creates the tables it lacks).
# 2: spans keyed by rollout and attempt too; 3: upstream api keys encrypted (store/database.py migrates both);
# 4: content columns sealed (store/keys/sealing.py; cells written before stay readable until `alight data encrypt`)
SCHEMA_VERSION = 4

# JSON in a text column, marked so store/rows.py encodes and decodes it: what a client sent (NaN and
# infinities refused) or what the gateway recorded (a -inf logprob kept).
CLIENT_JSON = {"json": "client"}
RECORDED_JSON = {"json": "recorded"}
# Content: each cell sealed with AES-GCM, bound to its row (store/keys/sealing.py). docs/data.md lists them.
SEALED = {"sealed": True}
SEALED_CLIENT_JSON = CLIENT_JSON | SEALED
SEALED_RECORDED_JSON = RECORDED_JSON | SEALED

metadata = MetaData()

schema_version = Table("schema_version", metadata, Column("version", Integer, nullable=False))

# Store-wide counters. `rollout_seq` is bumped inside every transaction that changes a
# rollout; the row lock orders those commits, so seq order is commit order and a
# `since_seq` cursor never skips a change that committed late.
counters = Table(
    "counters",
    metadata,
    Column("name", String(50), primary_key=True),
    Column("value", BigInteger, nullable=False),
)

rollouts = Table(
    "rollouts",
    metadata,
    Column("id", String(200), primary_key=True),
    # Creation order, for fair claiming; `seq` moves, this does not.
    Column("ordinal", BigInteger, nullable=False),
    Column("task", Text, nullable=False, info=SEALED_CLIENT_JSON),
    Column("mode", String(10), nullable=False),
    Column("group_id", String(200)),
    Column("runner", Text, info=CLIENT_JSON),  # JSON or NULL
    Column("timeout_s", Float, nullable=False),
    Column("max_attempts", Integer, nullable=False),
    Column("metadata", Text, nullable=False, info=SEALED_CLIENT_JSON),
    Column("state", String(20), nullable=False),
    Column("policy_version", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("seq", BigInteger, nullable=False, unique=True),
    # True while the rollout waits for its next attempt (queued, or running after an
    # infra/timeout failure with attempts left): what claim_attempts looks for.
    Column("claimable", Boolean, nullable=False),
    Column("attempt_count", Integer, nullable=False),
    # Hash of the create body: a retried create with the same id must carry the same body.
    Column("body_hash", String(64), nullable=False),
    Index("ix_rollouts_claim", "claimable", "ordinal"),
    Index("ix_rollouts_group", "group_id"),
    Index("ix_rollouts_state_seq", "state", "seq"),
)

attempts = Table(
    "attempts",
    metadata,
    Column("rollout_id", String(200), ForeignKey("rollouts.id", ondelete="CASCADE"), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("status", String(20), nullable=False),
    Column("failure_kind", String(20)),
    Column("message", Text, info=SEALED),  # an agent's failure message can quote its output
    Column("exit_code", Integer),
    Column("runner_handle", String(500)),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("ended_at", DateTime(timezone=True)),
    # Ended by a rollout transition (cancel, manual status), not by its runner's report.
    Column("ended_by_transition", Boolean, nullable=False, default=False),
    PrimaryKeyConstraint("rollout_id", "attempt"),
)

events = Table(
    "events",
    metadata,
    Column("pk", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("rollout_id", String(200), ForeignKey("rollouts.id", ondelete="CASCADE"), nullable=False),
    Column("id", String(200), nullable=False),
    Column("attempt", Integer),
    Column("kind", String(100), nullable=False),
    Column("payload", Text, nullable=False, info=SEALED_CLIENT_JSON),  # gate evidence (diffs) among them
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("rollout_id", "id", name="uq_events_rollout_id"),
    # A cell is bound to (rollout_id, id), which the writer knows before the insert assigns `pk`.
    info={"identity": ("rollout_id", "id")},
)

rewards = Table(
    "rewards",
    metadata,
    Column("pk", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("rollout_id", String(200), ForeignKey("rollouts.id", ondelete="CASCADE"), nullable=False),
    Column("id", String(200), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("value", Float, nullable=False),
    Column("name", String(200)),
    Column("final", Boolean, nullable=False),
    Column("span_id", String(64)),
    Column("model_call_id", String(200)),
    Column("source", String(20), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("rollout_id", "id", name="uq_rewards_rollout_id"),
    Index("ix_rewards_attempt", "rollout_id", "attempt"),
)

# The gateway's hot path: one INSERT per model call. Token ids and logprobs are
# compact JSON arrays in text columns; nothing is queried inside them.
model_calls = Table(
    "model_calls",
    metadata,
    Column("id", String(200), primary_key=True),
    Column("rollout_id", String(200), ForeignKey("rollouts.id", ondelete="CASCADE"), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("trace_id", String(32)),
    Column("span_id", String(16)),
    Column("flavour", String(20), nullable=False),
    Column("request", Text, nullable=False, info=SEALED_RECORDED_JSON),
    Column("response", Text, info=SEALED_RECORDED_JSON),
    Column("prompt_token_ids", Text, nullable=False, info=SEALED_RECORDED_JSON),
    Column("response_token_ids", Text, nullable=False, info=SEALED_RECORDED_JSON),
    Column("response_logprobs", Text, nullable=False, info=SEALED_RECORDED_JSON),
    Column("extra_choices", Text, nullable=False, info=SEALED_RECORDED_JSON),
    Column("policy_version", Integer),
    Column("upstream", String(500)),
    Column("latency_ms", Float),
    Column("status_code", Integer, nullable=False),
    Column("error", Text, info=SEALED),  # an upstream's error can quote the request
    Column("streamed", Boolean, nullable=False),
    Column("flags", Text, nullable=False, info=RECORDED_JSON),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("rollout_id", "attempt", "seq", name="uq_model_calls_seq"),
)

spans = Table(
    "spans",
    metadata,
    Column("trace_id", String(32), nullable=False),
    Column("span_id", String(16), nullable=False),
    Column("parent_span_id", String(16)),
    Column("rollout_id", String(200), ForeignKey("rollouts.id", ondelete="CASCADE"), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("name", Text, nullable=False, info=SEALED),  # some frameworks name a span after a tool call or prompt
    Column("kind", Integer, nullable=False),
    Column("start_time_ns", BigInteger, nullable=False),
    Column("end_time_ns", BigInteger),
    Column("attributes", Text, nullable=False, info=SEALED_RECORDED_JSON),
    Column("events", Text, nullable=False, info=SEALED_RECORDED_JSON),
    Column("status_code", Integer, nullable=False),
    Column("status_message", Text, info=SEALED),
    # A span belongs to the attempt that exported it: the same ids sent by another rollout are that
    # rollout's span (stored under each), and a retried export within one attempt changes nothing.
    PrimaryKeyConstraint("rollout_id", "attempt", "trace_id", "span_id"),
    Index("ix_spans_attempt", "rollout_id", "attempt", "start_time_ns"),
)

upstreams = Table(
    "upstreams",
    metadata,
    Column("id", String(200), primary_key=True),
    Column("url", Text, nullable=False),
    Column("policy_version", Integer, nullable=False),
    Column("model", String(500)),
    # The key itself only as a Fernet token (alight_server/store/keys/upstream.py), or a reference read at use.
    Column("api_key_sealed", Text),
    Column("api_key_env", String(200)),
    Column("api_key_file", Text),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

policy_versions = Table(
    "policy_versions",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("metadata", Text, nullable=False, info=CLIENT_JSON),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# Gateway processes sharing this store report here, so a pause and its drain cover every one.
# The pause itself is two counters: `gateway_paused` (0/1) and `gateway_pause_epoch`.
gateway_replicas = Table(
    "gateway_replicas",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("address", Text, nullable=False),
    Column("paused", Boolean, nullable=False),
    Column("pause_epoch", BigInteger, nullable=False),
    Column("in_flight", Integer, nullable=False),
    Column("reported_at", Float, nullable=False),
)

# Several policies: a row per policy paused on its own (its calls get 429); the pause epoch moves with each change.
gateway_paused_policies = Table("gateway_paused_policies", metadata, Column("policy", String(200), primary_key=True))

# Each replica's calls in flight per policy, written with its gateway_replicas row (a policy's drain waits on them).
gateway_replica_policies = Table(
    "gateway_replica_policies",
    metadata,
    Column("replica_id", String(64), primary_key=True),
    Column("policy", String(200), primary_key=True),
    Column("in_flight", Integer, nullable=False),
)

# Training runs as their trainers report them (the dashboard's runs page), and each step's metrics.
runs = Table(
    "runs",
    metadata,
    Column("id", String(200), primary_key=True),
    Column("status", String(20), nullable=False),
    # A training config can carry content (a system prompt, task file paths, reward settings): sealed.
    Column("config", Text, nullable=False, info=SEALED_CLIENT_JSON),
    Column("steps_planned", Integer),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

run_steps = Table(
    "run_steps",
    metadata,
    Column("run_id", String(200), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("step", Integer, nullable=False),
    Column("metrics", Text, nullable=False, info=CLIENT_JSON),  # JSON object of finite numbers
    Column("created_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("run_id", "step"),
)

# Data keys (store/keys/keyring.py): random 32-byte keys that seal content cells, stored only wrapped (AES-GCM)
# by a key-encryption key; `kek_id` is that KEK's fingerprint (a digest, not the key).
data_keys = Table(
    "data_keys",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("wrapped", Text, nullable=False),
    Column("kek_id", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# Tombstones of purged rollouts (store/retention.py): the rollout and every row under it are deleted, and
# this says when and why, so a read of its id answers "purged on DATE" (410) rather than "no such rollout".
purged_rollouts = Table(
    "purged_rollouts",
    metadata,
    Column("rollout_id", String(200), primary_key=True),
    Column("purged_at", DateTime(timezone=True), nullable=False),
    Column("reason", Text, nullable=False),
)
