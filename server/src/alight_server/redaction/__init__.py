"""Redaction for people: secrets and personal data hidden in every copy a person reads; training data never."""

from __future__ import annotations

from alight_server.redaction.config import PatternRule, RedactionConfig
from alight_server.redaction.detectors import KINDS, Span
from alight_server.redaction.redactor import Redactor, default_redactor, mark

__all__ = ["KINDS", "PatternRule", "RedactionConfig", "Redactor", "Span", "default_redactor", "mark"]
