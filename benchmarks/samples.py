"""Sample builder throughput: 1,000 synthetic multi-turn trajectories against a per-token baseline.

Each trajectory has 10 model calls: a ~200-token prompt, then each turn adds
~90 generated tokens and ~90 tokens of tool result, ending near 2k tokens.
The baseline does the same merge and padding with per-token Python loops,
timed in the same run on a subset. Run: `.venv/bin/python benchmarks/samples.py`.
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import UTC, datetime

import torch
from record import record

from alight.schemas import ApiFlavour, Mode, ModelCall, RolloutState, Trajectory, TrajectoryCall
from alight_server.trainer.step.samples import SampleConfig, build_samples

CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def synthetic_trajectory(index: int, rng: random.Random, calls: int = 10) -> Trajectory:
    context = [rng.randrange(32000) for _ in range(rng.randint(150, 250))]
    recorded = []
    for seq in range(calls):
        response = [rng.randrange(32000) for _ in range(rng.randint(60, 120))]
        call = ModelCall.model_construct(
            id=f"t{index}-{seq}",
            rollout_id=f"t{index}",
            attempt=1,
            seq=seq,
            flavour=ApiFlavour.CHAT,
            request={},
            response=None,
            prompt_token_ids=context,
            response_token_ids=response,
            response_logprobs=[-rng.random() for _ in response],
            extra_choices=[],
            policy_version=0,
            status_code=200,
            error=None,
            flags=[],
            created_at=CREATED,
        )
        recorded.append(TrajectoryCall.model_construct(call=call, span_path=[], agent_name=None, rewards=[]))
        context = context + response + [rng.randrange(32000) for _ in range(rng.randint(60, 120))]
    built = Trajectory.model_construct(
        rollout_id=f"t{index}",
        attempt=1,
        group_id=f"g{index // 8}",
        mode=Mode.TRAIN,
        state=RolloutState.SUCCEEDED,
        attempt_status=None,
        failure_kind=None,
        calls=recorded,
        tool_spans=[],
        rewards=[],
        final_reward=float(index % 2),
    )
    # Through JSON, as the trainer receives it: every prompt is its own list of its own int objects.
    return Trajectory.model_validate_json(built.model_dump_json())


def naive_build(trajectories: list[Trajectory], pad_token_id: int = 0) -> torch.Tensor:
    """The same trajectory-mode merge, one token at a time (the baseline)."""
    rows: list[tuple[list[int], list[float], list[float]]] = []
    for trajectory in trajectories:
        ids: list[int] = []
        mask: list[float] = []
        logprobs: list[float] = []
        for tc in trajectory.calls:
            prompt = tc.call.prompt_token_ids
            continues = len(prompt) >= len(ids)
            for i, token in enumerate(ids):
                if not continues or prompt[i] != token:
                    continues = False
                    break
            if ids and not continues:
                rows.append((ids, mask, logprobs))
                ids, mask, logprobs = [], [], []
            for token in prompt[len(ids) :]:
                ids.append(token)
                mask.append(0.0)
                logprobs.append(0.0)
            for token, logprob in zip(tc.call.response_token_ids, tc.call.response_logprobs, strict=True):
                ids.append(token)
                mask.append(1.0)
                logprobs.append(logprob)
        rows.append((ids, mask, logprobs))
    width = max(len(ids) for ids, _, _ in rows)
    padded_ids, padded_mask, padded_logprobs = [], [], []
    for ids, mask, logprobs in rows:
        padded_ids.append([ids[t] if t < len(ids) else pad_token_id for t in range(width)])
        padded_mask.append([mask[t] if t < len(ids) else 0.0 for t in range(width)])
        padded_logprobs.append([logprobs[t] if t < len(ids) else 0.0 for t in range(width)])
    torch.tensor(padded_mask)
    torch.tensor(padded_logprobs)
    return torch.tensor(padded_ids)


def main() -> None:
    parser = argparse.ArgumentParser(description="Sample builder throughput against a per-token baseline.")
    parser.add_argument("--trajectories", type=int, default=1000)
    parser.add_argument("--baseline-trajectories", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--record", action="store_true", help="append the result to benchmarks/results.jsonl (benchmarks/record.py)"
    )
    args = parser.parse_args()

    rng = random.Random(0)
    start = time.perf_counter()
    trajectories = [synthetic_trajectory(i, rng) for i in range(args.trajectories)]
    print(f"generating and parsing the trajectories from JSON (not timed below): {time.perf_counter() - start:.1f} s")
    recorded = sum(
        len(tc.call.prompt_token_ids) + len(tc.call.response_token_ids) for t in trajectories for tc in t.calls
    )

    config = SampleConfig(mode="trajectory")
    batch, report = build_samples(trajectories, config)  # warm-up, and the result checked below
    best = float("inf")
    for _ in range(args.repeats):
        start = time.perf_counter()
        build_samples(trajectories, config)
        best = min(best, time.perf_counter() - start)
    subset = trajectories[: args.baseline_trajectories]
    start = time.perf_counter()
    naive_ids = naive_build(subset)
    naive_seconds = time.perf_counter() - start

    fast_rows = batch.input_ids[: len(subset)]
    assert torch.equal(naive_ids, fast_rows[:, : naive_ids.shape[1]]), "baseline and builder disagree"
    naive_tokens = int((naive_ids != 0).sum())
    fast_rate = report.tokens / best
    naive_rate = naive_tokens / naive_seconds
    print(f"trajectories: {report.trajectories}, model calls: {report.calls}, rows: {report.rows}")
    print(f"row tokens: {report.tokens} ({report.trained_tokens} trained); recorded call tokens read: {recorded}")
    print(
        f"builder:  {best:.3f} s  {fast_rate / 1e6:.2f} M row tokens/s  {recorded / best / 1e6:.1f} M recorded tokens/s"
    )
    print(f"baseline: {naive_seconds:.3f} s for {len(subset)} trajectories  {naive_rate / 1e6:.3f} M row tokens/s")
    print(f"speed-up: {fast_rate / naive_rate:.1f}x")
    if args.record:
        record(
            "samples",
            f"sample builder, {args.trajectories} trajectories x 10 calls (~2k tokens), best of {args.repeats}; "
            f"the per-token baseline on {len(subset)} of them",
            f"{best:.3f} s, {fast_rate / 1e6:.2f}M row tokens/s; {fast_rate / naive_rate:.1f}x a per-token baseline "
            f"({naive_rate / 1e6:.3f}M row tokens/s)",
        )


if __name__ == "__main__":
    main()
