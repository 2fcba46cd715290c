"""Rows of calls imported as text (fidelity `rendered`) before a policy-gradient step: refuse, drop or recompute.

No logprob was recorded when a rendered call was sampled, so pi / pi_old has no pi_old; supervised fine-tuning
(`estimator: sft`) needs none and trains such rows as they are."""

from __future__ import annotations

from alight_server.trainer.step.algorithm import AlgorithmConfig
from alight_server.trainer.step.samples import SampleBatch


class RenderedRowsError(ValueError):
    """A policy-gradient step was handed rendered rows under `algorithm.rendered_rows: refuse`."""


def needs_recompute(batch: SampleBatch, algorithm: AlgorithmConfig) -> bool:
    """True when the backend must fill the rendered rows' pi_old with the current policy's logprobs first."""
    return algorithm.estimator != "sft" and algorithm.rendered_rows == "recompute" and bool(batch.row_rendered.any())


def refuse_rendered(batch: SampleBatch, algorithm: AlgorithmConfig) -> None:
    """RenderedRowsError when a policy-gradient step would form a ratio against logprobs nobody recorded."""
    rendered = int(batch.row_rendered.sum())
    if not rendered or algorithm.estimator == "sft" or algorithm.rendered_rows == "recompute":
        return
    raise RenderedRowsError(
        f"{rendered} of {batch.num_rows} rows hold model calls of fidelity 'rendered' (imported as text: no "
        f"recorded logprobs), and a {algorithm.estimator} step needs them for its ratio. Set "
        "algorithm.rendered_rows: drop (leave them out) or recompute (pi_old from the current policy before the "
        "step), or fine-tune on them with algorithm.estimator: sft"
    )


def rows_for_step(batch: SampleBatch, algorithm: AlgorithmConfig) -> tuple[SampleBatch, dict[str, float]]:
    """The batch a step may train on under `algorithm.rendered_rows`, and `samples/rendered_*` metrics."""
    rendered = int(batch.row_rendered.sum())
    metrics = {"samples/rendered_rows": float(rendered)} if rendered else {}
    if not rendered or algorithm.estimator == "sft":
        return batch, metrics
    if algorithm.rendered_rows == "drop":
        exact = (~batch.row_rendered).nonzero()[:, 0]
        return batch.select(exact), {**metrics, "samples/rendered_dropped": float(rendered)}
    refuse_rendered(batch, algorithm)
    return batch, {**metrics, "samples/rendered_recomputed": float(rendered)}
