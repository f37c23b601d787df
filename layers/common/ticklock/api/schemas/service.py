"""What the service says of itself: its handlers (GET /handlers) and its health (GET /health)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class HandlerOut(BaseModel):
    name: str
    description: str
    is_async: bool


class Health(BaseModel):
    """What anyone may learn: up or not."""

    status: Literal["ok", "unavailable"]


class CheckOut(BaseModel):
    """One plug-in health check's answer."""

    name: str = Field(description="<plug-in>.<check>")
    status: Literal["ok", "failing"]
    error: str | None = Field(description="what is wrong, when it is failing")


class HealthDetails(BaseModel):
    """With a valid token (or on a loopback-only server without one): why. ``degraded``: the store answers
    (the scheduler runs, so the status code is 200) but a plug-in's check fails."""

    status: Literal["ok", "degraded", "unavailable"]
    store: Literal["ok", "unavailable"]
    store_error: str | None = Field(description="the store's error, when it is unavailable")
    checks: list[CheckOut] = Field(description="the installed plug-ins' health checks")
    version: str
