"""Sampling parameters, next-token sampling per sequence, and logprobs of the raw model distribution."""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field

import torch

MAX_TOP_LOGPROBS = 20


class InvalidRequest(ValueError):
    """A request the engine cannot serve as asked; the message names the field and the allowed range.

    `code`: the providers' error code where it is more precise than the status (`model_not_found`).
    """

    def __init__(self, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.param, self.code = param, code


@dataclass
class SamplingParams:
    """What one request asks for. `temperature == 0` means greedy; `seed` makes sampling reproducible."""

    max_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    n: int = 1
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    top_logprobs: int = 0
    ignore_eos: bool = False
    adapter: str | None = None  # the served model name of an engine with adapters; None: the base model

    def validate(self, max_n: int) -> None:
        if self.max_tokens is not None and self.max_tokens < 1:
            raise InvalidRequest(f"max_tokens must be at least 1; got {self.max_tokens}", "max_tokens")
        if not (math.isfinite(self.temperature) and 0.0 <= self.temperature <= 2.0):
            raise InvalidRequest(f"temperature must be between 0 and 2; got {self.temperature}", "temperature")
        if not (math.isfinite(self.top_p) and 0.0 < self.top_p <= 1.0):
            raise InvalidRequest(f"top_p must be in (0, 1]; got {self.top_p}", "top_p")
        if not 1 <= self.n <= max_n:
            raise InvalidRequest(f"n must be between 1 and {max_n} on this server; got {self.n}", "n")
        if not 0 <= self.top_logprobs <= MAX_TOP_LOGPROBS:
            raise InvalidRequest(
                f"top_logprobs must be between 0 and {MAX_TOP_LOGPROBS}; got {self.top_logprobs}", "top_logprobs"
            )
        if self.seed is not None and not -(2**63) <= self.seed < 2**63:
            raise InvalidRequest(f"seed must fit in a signed 64-bit integer; got {self.seed}", "seed")
        if any(not s for s in self.stop) or len(self.stop) > 4:
            raise InvalidRequest(f"stop takes up to 4 non-empty strings; got {self.stop!r}", "stop")


def choice_generator(params: SamplingParams, choice: int, device: torch.device) -> torch.Generator:
    """Choice i of a seeded request draws from seed + i, so its tokens don't depend on what it is batched with."""
    generator = torch.Generator(device=device)
    generator.manual_seed((params.seed + choice) % 2**63 if params.seed is not None else secrets.randbits(63))
    return generator


def sample_next(logits: torch.Tensor, params: list[SamplingParams], generators: list[torch.Generator]) -> torch.Tensor:
    """One next token per row of `logits` (B, V), each row under its own params and generator -> (B,)."""
    chosen = logits.argmax(dim=-1)  # (B,) the greedy choice, kept for temperature-0 rows
    for row, (p, generator) in enumerate(zip(params, generators, strict=True)):
        if p.temperature == 0.0:
            continue
        probs = torch.softmax(logits[row].float() / p.temperature, dim=-1)  # (V,)
        if p.top_p < 1.0:
            sorted_probs, order = probs.sort(descending=True)
            # Keep the smallest prefix whose mass reaches top_p (the top token always survives).
            outside = sorted_probs.cumsum(-1) - sorted_probs >= p.top_p
            sorted_probs[outside] = 0.0
            probs = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
        chosen[row] = torch.multinomial(probs, 1, generator=generator)[0]
    return chosen


def raw_logprobs(
    logits: torch.Tensor, chosen: torch.Tensor, top_k: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Logprobs under the unscaled model distribution, as vLLM reports by default and the trainer recomputes.

    Returns chosen (B,), top values (B, k) and top ids (B, k). Temperature and top_p shape what is sampled,
    not what is reported: the PPO ratio compares against log_softmax(logits) of the trainer's forward pass.
    """
    logp = torch.log_softmax(logits.float(), dim=-1)  # (B, V)
    chosen_logp = logp.gather(-1, chosen[:, None])[:, 0]  # (B,)
    top_values, top_ids = logp.topk(top_k, dim=-1) if top_k else (logp[:, :0], chosen[:, None][:, :0])
    return chosen_logp, top_values, top_ids
