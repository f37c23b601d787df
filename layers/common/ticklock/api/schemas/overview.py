"""The service at a glance (GET /overview)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from ticklock.api.schemas.alerts import AlertOut
from ticklock.api.schemas.executions import ExecutionOut
from ticklock.api.schemas.fields import STRICT


class ActivityOut(BaseModel):
    at: datetime = Field(description="the start of the step")
    counts: dict[str, int] = Field(
        description="the fires scheduled in this step by what became of them: each run's final status (and "
        "running), skipped and missed"
    )


class LagOut(BaseModel):
    p50: float | None = Field(description="seconds; null without runs")
    p99: float | None
    max: float | None
    sample: int = Field(description="how many of the latest runs of the window these are of")


class OverviewOut(BaseModel):
    now: datetime
    jobs: dict[str, int] = Field(
        description="how many jobs there are (total), in each state and with each condition (see a job's state)"
    )
    window: int = Field(description="the window's length, in minutes")
    step: int = Field(description="the length of each step of activity, in seconds")
    activity: list[ActivityOut] = Field(description="the window's fires by step, earliest first (every step)")
    lag: LagOut = Field(description="dispatch lag: from when a fire was due to when its run started")
    failures: list[ExecutionOut] = Field(description="the latest runs that failed, timed out or were lost")
    alerts: list[AlertOut] = Field(
        description="the alerts raised and not cleared of the first jobs by name (at most the query's alerts)"
    )


class OverviewQuery(BaseModel):
    model_config = STRICT
    window: int = Field(60, ge=1, le=1440, description="minutes of activity, to now")
    step: int = Field(60, ge=10, le=3600, description="seconds per step of activity")
    failures: int = Field(10, ge=0, le=100, description="how many of the latest failures to list")
    alerts: int = Field(
        20, ge=0, le=100, description="how many jobs' open alerts to list, by job name (jobs.alerting counts them all)"
    )
