"""The `judge:` section of a train config: which model judges, by what rubric, in which mode, at what weight."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from alight_server.trainer.config.sections import Section


class JudgeConfig(Section):
    """An LLM judge. Exactly one of `model` (a frozen policy of this run), `upstream` (a gateway upstream id)
    or `url` (any OpenAI-compatible /v1, with `key_file`) names where it is served."""

    model: str | None = Field(default=None, min_length=1, description="a policy of this run with trainable: false")
    upstream: str | None = Field(default=None, min_length=1, description="an upstream id registered with the server")
    url: str | None = Field(default=None, min_length=1, description="an OpenAI-compatible base URL, ending in /v1")
    key_file: str | None = Field(default=None, min_length=1, description="the API key for `url`, one line")
    served_model: str | None = Field(default=None, min_length=1, description="the model name sent; default: model")
    rubric: str = Field(min_length=1, description="what a good answer is: text, or a file path relative to the config")
    mode: Literal["absolute", "group"] = "absolute"
    # text: the judge writes `SCORE LABEL: N` lines; logprobs: one digit token per answer, scored by the digits'
    # expected value (trainer/judge/prompt.py), which any model can answer and no answer can make it parrot
    scoring: Literal["text", "logprobs"] = "text"
    min_digit_mass: float = Field(default=0.5, ge=0, le=1)  # logprobs: less probability on the digits is no score
    weight: float = Field(default=1.0, gt=0, le=1000)
    replace: bool = False  # the final reward is weight x score alone; the verifiable one is kept but not added
    only_when_tied: bool = False  # judge only the groups whose verifiable rewards are all equal
    max_tokens: int = Field(default=256, ge=1, le=32768)
    temperature: float = Field(default=0.0, ge=0, le=2)
    retries: int = Field(default=3, ge=0, le=20)  # more tries after a transient error (429, 5xx, timeout)
    timeout_s: float = Field(default=60.0, gt=0, le=3600)  # each try; the bound on a judgement is tries x this
    concurrency: int = Field(default=4, ge=1, le=64)  # judgements in flight at once

    @model_validator(mode="after")
    def _one_place(self) -> JudgeConfig:
        named = [k for k in ("model", "upstream", "url") if getattr(self, k) is not None]
        if len(named) != 1:
            raise ValueError(
                f"judge: needs exactly one of model (a frozen policy), upstream (an upstream id) or url "
                f"(with key_file); got {named or 'none'}"
            )
        if self.url is not None and self.key_file is None:
            raise ValueError("judge.url needs judge.key_file: the file holding its API key (one line)")
        if self.key_file is not None and self.url is None:
            raise ValueError("judge.key_file is only read with judge.url; remove it or set judge.url")
        return self

    def resolved(self, base: Path) -> JudgeConfig:
        """A copy with `key_file` absolute against `base` (the config's folder) and a rubric that names a file
        there replaced by the file's text."""
        rubric = self.rubric
        if "\n" not in rubric and len(rubric) < 500 and (base / rubric).is_file():
            rubric = (base / rubric).read_text()
        key_file = None if self.key_file is None else str((base / Path(self.key_file).expanduser()).resolve())
        return self.model_copy(update={"rubric": rubric, "key_file": key_file})

    def sampling(self) -> dict[str, Any]:
        """The judge call's sampling: one token with the top 20 alternatives' logprobs when scored by digits."""
        if self.scoring == "logprobs":
            return {"max_tokens": 1, "temperature": self.temperature, "logprobs": True, "top_logprobs": 20}
        return {"max_tokens": self.max_tokens, "temperature": self.temperature}

    def tries_bound_s(self) -> float:
        """The longest one judgement may take, waits between tries aside: what an update may wait on it."""
        return self.timeout_s * (self.retries + 1)
