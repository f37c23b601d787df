"""The one body of every 4xx and 5xx answer."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ErrorDetail(BaseModel):
    field: str = Field(description="the field at fault: body, payload.x, schedule.cron.expr, query.limit ...")
    message: str


class ErrorBody(BaseModel):
    """Every 4xx and 5xx answer."""

    error: str = Field(description="a stable code: validation_error, not_found, unauthorized, overloaded ...")
    message: str = Field(description="what is wrong, for a person; leads with the field when one is at fault")
    details: list[ErrorDetail]
