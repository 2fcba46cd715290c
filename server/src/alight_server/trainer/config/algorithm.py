"""The config's `algorithm:` section (trainer/step/algorithm.py applies it): plain settings, no torch, so reading
or refusing a config never imports it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Estimator = Literal["grpo", "rloo", "sft", "distill"]
Aggregation = Literal["per_rollout_mean", "token_mean", "seq_mean"]


class DistillConfig(BaseModel):
    """On-policy distillation: a teacher's logprobs of the student's sampled tokens as a per-token reward."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # What the inference side can load: a registered name (`tiny`, `smollm2-135m`) or a local Hugging Face folder
    # (an SFT'd checkpoint exported whole). It must share the student's tokenizer: it scores the student's token ids.
    teacher: str = Field(min_length=1)
    # Per-token reward = weight x (teacher logprob - student logprob): the negative reverse-KL estimate.
    weight: float = Field(default=1.0, gt=0)


class AlgorithmConfig(BaseModel):
    """The algorithm's settings, defined once: the config's `algorithm:` section and every backend use this."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    estimator: Estimator = "grpo"
    # Divide group-centred rewards by the group's std (Dr. GRPO turns this off).
    normalize_std: bool = True
    eps: float = Field(default=1e-6, ge=0, description="added to the group std")
    aggregation: Aggregation = "per_rollout_mean"
    clip_low: float = Field(default=0.2, ge=0, lt=1, description="ratio floor 1 - clip_low (negative advantage)")
    # Ratio ceiling 1 + clip_high when the advantage is positive; 0.28 ("clip higher") keeps exploring.
    clip_high: float = Field(default=0.28, ge=0)
    kl_coef: float = Field(default=0.0, ge=0, description="> 0 keeps a frozen reference and needs its logprobs")
    tis_cap: float | None = Field(default=None, gt=0, description="cap on pi_old / pi_rollout; None: no TIS")
    step_reward_coef: float = Field(default=0.0, ge=0, description="per-turn credit: weight of step rewards to go")
    # Optimizer updates per batch of rollouts; >1 reuses the batch with the clipped ratio doing its job.
    updates_per_batch: int = Field(default=1, ge=1, le=64)
    # Rows of calls known only as text (imported traces of fidelity `rendered`) have no recorded logprobs to
    # form a ratio with. refuse: a policy-gradient step on them is an error; drop: they are left out (counted);
    # recompute: pi_old is the current policy's logprob before the step (on-policy only if the traces were
    # sampled from these very weights; otherwise the ratio starts at 1 and corrects nothing). sft ignores it.
    rendered_rows: Literal["refuse", "drop", "recompute"] = "refuse"
    # A teacher (docs/training.md#a-teacher-on-policy-distillation): the whole signal with estimator distill, or
    # a per-token term added to the GRPO / RLOO advantage.
    distill: DistillConfig | None = None

    @model_validator(mode="after")
    def _estimator_fits(self) -> AlgorithmConfig:
        if self.estimator == "distill" and self.distill is None:
            raise ValueError("algorithm.estimator: distill needs a teacher; add algorithm.distill: {teacher: MODEL} "
                             "(a registered model name or a local Hugging Face folder)")  # fmt: skip
        if self.estimator == "sft" and self.distill is not None:
            raise ValueError("algorithm.distill adds a per-token reward to a policy-gradient step, but estimator "
                             "sft has no reward; use estimator: distill (or grpo / rloo) or remove distill:")  # fmt: skip
        for key in ("kl_coef", "tis_cap", "step_reward_coef"):
            if self.estimator == "sft" and (value := getattr(self, key)):
                raise ValueError(f"{key}={value} has no meaning for estimator sft (no ratio, no advantage); remove it")
        return self
