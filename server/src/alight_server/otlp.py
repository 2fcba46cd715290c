"""TODO: OTLP/HTTP trace ingest at /v1/traces."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
