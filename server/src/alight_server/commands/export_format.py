"""The alight-export lines of one run (docs/data.md#export-format): a header, then per rollout its line, its
model calls' lines and its training rows, read through the server's API with the admin key as the trainer reads
them. Each rollout's latest attempt goes through the trainer's own filter (`filter_for_training`), split by
policy when the run has `policies:` (as the trainer splits), and its sample builder (`build_samples`) under the
run's `samples:` settings, so the rows are the ones training made. `redact_line` makes one line's copy for people.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from alight.api_models import MAX_BATCH, RolloutQuery, RunList
from alight.client import AlightClient, ApiError
from alight.schemas import Mode, ModelCall, Rollout, RolloutState, Run, Trajectory

FORMAT, VERSION = "alight-export", 1
# Fields holding token ids: a redacted export leaves them out, since they decode straight back to the text.
TOKEN_ID_FIELDS = ("prompt_token_ids", "response_token_ids", "input_ids")
TEXT_FIELDS = ("task", "request", "response")
REWARD_FIELDS = {"name", "value", "final", "source", "attempt"}
CALL_FIELDS = {"rollout_id", "attempt", "seq", "policy_version", "flavour", "prompt_token_ids", "response_token_ids",
               "response_logprobs", "request", "response", "status_code", "flags", "upstream"}  # fmt: skip

Line = dict[str, Any]
Policies = Mapping[str, str | None]  # the run's policies, each with its named reward; {} for one policy


class ExportError(Exception):
    """The export cannot be made; the message says what to fix."""


def run_rollouts(client: AlightClient, run_id: str) -> list[Rollout]:
    """Every rollout the run created, by id: ids `<run id>-...` (the trainer names them so), less those of
    another run whose id extends this one's (`<run id>-b-...`), as the purge counts a run's rollouts."""
    runs = RunList.model_validate_json(client.request("GET", "/api/runs", params={"limit": 1000}).content).runs
    longer = tuple(f"{r.id}-" for r in runs if r.id.startswith(f"{run_id}-"))
    found: dict[str, Rollout] = {}
    since = 0
    while True:
        page = client.list_rollouts_page(RolloutQuery(id_prefix=f"{run_id}-", since_seq=since, limit=MAX_BATCH))
        found.update((r.id, r) for r in page.rollouts if not r.id.startswith(longer))
        if not page.rollouts:
            return [found[i] for i in sorted(found)]
        since = page.next_seq


def export_lines(client: AlightClient, run_id: str, *, now: datetime | None = None) -> Iterator[Line]:
    """The header, then per rollout its line, its calls' lines and its training rows (unredacted).

    One rollout at a time: a run of any size is written in the memory of its largest rollout. Rows are built
    per rollout, which gives the rows the trainer's batch gave (a row never spans two rollouts).
    """
    from alight_server.ui.samples import run_policies, sample_config

    run = _get_run(client, run_id)
    rollouts = run_rollouts(client, run_id)
    config = sample_config(run.config)
    policies = run_policies(run.config)  # {} for one policy
    yield {
        "format": FORMAT,
        "version": VERSION,
        "run_id": run.id,
        "exported_at": (now or datetime.now(UTC)).isoformat(),
        "redacted": False,
        "model": _model(client, run),
    }
    for rollout in rollouts:
        attempts = sorted(a.attempt for a in rollout.attempts)
        trajectories = [client.trajectory(rollout.id, n, reveal=True) for n in attempts]  # the exact data
        latest = trajectories[-1] if trajectories else None
        rows = _rows(rollout, latest, config, policies)
        yield _rollout_line(client, rollout, latest, len(rows))
        yield from (call_line(tc.call) for trajectory in trajectories for tc in trajectory.calls)
        yield from rows


def _rows(rollout: Rollout, latest: Trajectory | None, config: Any, policies: Policies) -> list[Line]:
    """The rollout's training rows, made as the module docstring says; with several policies each names its `policy`."""
    from alight_server.trainer.step.filters import filter_for_training
    from alight_server.trainer.step.samples import build_samples
    from alight_server.ui.policy_parts import split_run

    finished = rollout.state in (RolloutState.SUCCEEDED, RolloutState.FAILED)
    if latest is None or rollout.mode != Mode.TRAIN or not finished:
        return []
    kept, _ = filter_for_training([latest], config)
    rows: list[Line] = []
    for policy, part in split_run(kept, policies).parts:
        batch, _ = build_samples(part, config)
        rows.extend(row_lines(batch, latest, policy=policy, first_index=len(rows)))
    return rows


def redact_line(line: Line, redact: Callable[[Any], Any]) -> Line:
    """The people's copy of one line: text fields through `redact`, token id fields left out."""
    out = {
        k: redact(v) if k in TEXT_FIELDS and v is not None else v for k, v in line.items() if k not in TOKEN_ID_FIELDS
    }
    if line.get("format") == FORMAT:
        out["redacted"] = True
    return out


def _get_run(client: AlightClient, run_id: str) -> Run:
    try:
        return client.get_run(run_id)
    except ApiError as exc:
        if exc.status_code == 404:
            raise ExportError(
                f"no run with id {run_id!r} on {client.base_url}; the dashboard's run list (/ui) and "
                "GET /api/runs name the runs there"
            ) from exc
        raise ExportError(f"the server at {client.base_url} refused: {exc}") from exc


def _model(client: AlightClient, run: Run) -> str | None:
    """The run's `model`, else the model its upstreams serve when they all serve one."""
    if run.config.get("model"):
        return str(run.config["model"])
    served = {u.model for u in client.list_upstreams() if u.model}
    return served.pop() if len(served) == 1 else None


def _rollout_line(client: AlightClient, rollout: Rollout, latest: Trajectory | None, rows: int) -> Line:
    rewards = client.list_rewards(rollout.id)
    return {
        "kind": "rollout",
        "rollout_id": rollout.id,
        "group_id": rollout.group_id,
        "mode": rollout.mode.value,
        "task": rollout.task,
        "state": rollout.state.value,
        "policy_version": rollout.policy_version,
        "rewards": [r.model_dump(mode="json", include=REWARD_FIELDS) for r in rewards],
        "reward": latest.final_reward if latest is not None else None,
        "attempt": latest.attempt if latest is not None else None,  # the attempt trained on
        "rows": rows,
    }


def call_line(call: ModelCall) -> Line:
    fidelity = "rendered" if call.rendered else "exact"
    return {"kind": "call", **call.model_dump(mode="json", include=CALL_FIELDS), "fidelity": fidelity}


def row_lines(batch: Any, trajectory: Trajectory, *, policy: str | None = None, first_index: int = 0) -> Iterator[Line]:
    """One rollout's padded rows unpadded, with each generated token's policy version from its call; with
    several policies, one policy's rows (`policy`), indexed on from `first_index` after the other policies' rows."""
    for r in range(batch.num_rows):
        length = int(batch.attention_mask[r].sum())
        loss_mask = [int(m) for m in batch.loss_mask[r, :length].tolist()]
        named = {} if policy is None else {"policy": policy}  # a run of one policy writes the rows as before
        yield {
            "kind": "row",
            "rollout_id": trajectory.rollout_id,
            "attempt": trajectory.attempt,
            "index": first_index + r,
            **named,
            "input_ids": batch.input_ids[r, :length].tolist(),
            "loss_mask": loss_mask,
            "old_logprobs": batch.old_logprobs[r, :length].tolist(),
            "policy_versions": _token_versions(loss_mask, batch.row_calls[r], trajectory),
            "reward": float(batch.row_reward[r]),
            "group_id": batch.group_ids[int(batch.row_group[r])],
            "calls": list(batch.row_calls[r]),
        }


def _token_versions(loss_mask: list[int], seqs: tuple[int, ...], trajectory: Trajectory) -> list[int]:
    """-1 on context; on generated tokens the version of the call that made them (a row's calls generate its
    masked tokens in order, each its response's length; only the last may be cut short by truncation)."""
    by_seq = {tc.call.seq: tc.call for tc in trajectory.calls}
    made = [_version(by_seq[seq]) for seq in seqs for _ in by_seq[seq].response_token_ids]
    versions, taken = [-1] * len(loss_mask), 0
    for position, masked in enumerate(loss_mask):
        if masked:
            versions[position] = made[taken]
            taken += 1
    return versions


def _version(call: ModelCall) -> int:
    return -1 if call.policy_version is None else call.policy_version
