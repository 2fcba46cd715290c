"""The server config's `redaction:` section: which detectors run, and the operator's own patterns."""

from __future__ import annotations

import re

import phonenumbers
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from alight_server.redaction.detectors import DEFAULT_OFF, KINDS


class PatternRule(BaseModel):
    """One operator pattern: text matching `regex` is shown as `[REDACTED:name]`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9_]{1,40}$", description="the kind shown in the mark, e.g. employee_id")
    regex: str = Field(min_length=1, max_length=2000)

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise ValueError(f"redaction pattern {value!r} is not a regular expression: {exc}") from exc
        if compiled.match(""):
            raise ValueError(f"redaction pattern {value!r} matches the empty string: it would mark every position")
        return value


class RedactionConfig(BaseModel):
    """What the copies people read hide. Every detector is on by default except those in DEFAULT_OFF."""

    model_config = ConfigDict(extra="forbid")

    disable: list[str] = Field(default_factory=list, description="detector kinds to leave out, e.g. [phone]")
    enable: list[str] = Field(default_factory=list, description=f"kinds off by default to add: {sorted(DEFAULT_OFF)}")
    patterns: list[PatternRule] = Field(default_factory=list)
    # The regions (ISO 3166 codes) a phone number written without its country code is read in, each in
    # turn; a number written with +CC is found whatever the region.
    phone_regions: list[str] = Field(default_factory=lambda: ["US"], min_length=1, max_length=20)

    @field_validator("phone_regions")
    @classmethod
    def _regions(cls, value: list[str]) -> list[str]:
        unknown = [r for r in value if r not in phonenumbers.SUPPORTED_REGIONS]
        if unknown:
            raise ValueError(f"unknown phone region(s) {unknown}: use ISO 3166 codes such as US, GB, DE, IN")
        return value

    @model_validator(mode="after")
    def _known_kinds(self) -> RedactionConfig:
        unknown = sorted(k for k in {*self.disable, *self.enable} if k not in KINDS)
        if unknown:
            raise ValueError(f"unknown redaction detector kind(s) {unknown}; known: {', '.join(KINDS)}")
        return self

    def kinds(self) -> frozenset[str]:
        """The detector kinds that run."""
        return frozenset(k for k in KINDS if (k not in DEFAULT_OFF or k in self.enable) and k not in self.disable)
