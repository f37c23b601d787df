"""A user's pause or skip of a job: asked for (POST /jobs/{id}/pause, /skip), and as a job shows it."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StrictStr

from ticklock.api.schemas.fields import STRICT, Instant, WholeNumber
from ticklock.domain.jobs import MAX_NOTE, MAX_SKIP

Note = Annotated[StrictStr | None, Field(max_length=MAX_NOTE, description="why, for whoever looks next")]


class PauseIn(BaseModel):
    """A pause: until resumed, or ``until`` an instant (its first fire at or after it); both with a note."""

    model_config = STRICT
    note: Note = None
    until: Instant = Field(
        None, description="resume by itself at the first fire at or after this instant (RFC 3339); null: until resumed"
    )


class SkipIn(BaseModel):
    model_config = STRICT
    count: WholeNumber = Field(ge=1, le=MAX_SKIP, description="how many of the job's next fires to skip")
    note: Note = None


class HoldOut(BaseModel):
    kind: Literal["pause", "skip"]
    since: datetime = Field(description="when it was asked for")
    note: str | None
    until: datetime | None = Field(description="a pause's end, as asked; null: until resumed")
    skipped_from: datetime | None = Field(description="the first fire it holds back")
    resumes_at: datetime | None = Field(description="the job's first fire after it; null: until resumed")
    count: int | None = Field(description="how many fires a skip holds back")
