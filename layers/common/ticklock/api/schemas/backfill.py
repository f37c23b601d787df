"""A past window of a job's schedule run again (POST /jobs/{id}/backfill)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from ticklock.api.schemas.fields import InstantText


class BackfillIn(BaseModel):
    """A past window of the job's schedule to run again."""

    model_config = ConfigDict(extra="forbid")
    from_: InstantText = Field(
        alias="from",
        max_length=64,
        description="the window's start (RFC 3339)",
        json_schema_extra={"format": "date-time"},
    )
    to: InstantText = Field(
        max_length=64,
        description="the window's end (RFC 3339), not after now",
        json_schema_extra={"format": "date-time"},
    )
    overlap: Literal["buffer_all", "allow_all"] = Field(
        "buffer_all", description="its fires one after another (buffer_all), or side by side (allow_all)"
    )
    dry_run: StrictBool = Field(False, description="list the fires it would run, and run none")


class BackfillFireOut(BaseModel):
    at: datetime
    backfilled: bool = Field(description="already run by an earlier backfill: it is not run again")


class BackfillOut(BaseModel):
    job_id: str
    dry_run: bool
    count: int = Field(description="the window's fires that will run (or would, with dry_run)")
    fires: list[BackfillFireOut] = Field(description="every fire of the window, oldest first")
    pending: dict[str, Any] | None = Field(description="the job's backfill still to run: next_at, until, overlap")
