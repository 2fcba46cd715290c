"""Request bodies' base: a model that refuses unknown fields, and the label type stored in the clear."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict


def _no_nul(value: str | None) -> str | None:
    if value is not None and "\x00" in value:
        raise ValueError("must not contain NUL (0x00) characters (PostgreSQL text cannot hold them)")
    return value


# An id or name a client chooses that is stored in a clear column: NUL is refused on both stores alike
# (PostgreSQL cannot store it; SQLite would, and the same body must not be a 422 on one and stored on the other).
Label = Annotated[str, AfterValidator(_no_nul)]


class Strict(BaseModel):
    """Request bodies and settings: unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid")
