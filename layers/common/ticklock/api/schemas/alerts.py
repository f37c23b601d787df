"""A job's alert rules, and the alerts raised (GET /alerts)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, StrictFloat, StrictStr

from ticklock.api.schemas.fields import STRICT, WholeNumber
from ticklock.domain.job_settings import MAX_ALERT_SECONDS, MAX_FAILURES_IN_A_ROW, AlertRules
from ticklock.domain.jobs import Job


class AlertsIn(BaseModel):
    """When the job's alerts are raised, and where they go beside the event bus; a rule left out is not
    checked, and ``{}`` is no alerts."""

    model_config = STRICT
    late_after: StrictFloat | None = Field(
        None, ge=1.0, le=MAX_ALERT_SECONDS, description="seconds after a fire was due with no start: raised"
    )
    no_success_for: StrictFloat | None = Field(
        None, ge=1.0, le=MAX_ALERT_SECONDS, description="seconds with no successful run: raised"
    )
    failures_in_a_row: WholeNumber | None = Field(
        None, ge=1, le=MAX_FAILURES_IN_A_ROW, description="this many runs failed in a row: raised"
    )
    webhook: StrictStr | None = Field(
        None, max_length=2000, pattern=r"^https?://\S+$", description="POST each alert here (default: the deployment's)"
    )
    email: StrictStr | None = Field(
        None,
        max_length=320,
        pattern=r"^[^@\s]+@[^@\s]+$",
        description="mail each alert here (default: the deployment's)",
    )

    def to_domain(self) -> AlertRules | None:
        return AlertRules.from_dict(self.model_dump(exclude_none=True))


class AlertOut(BaseModel):
    job_id: str
    job_name: str
    condition: Literal["late", "no_success", "failures_in_a_row"]
    raised_at: datetime
    detail: str

    @staticmethod
    def all_of(job: Job) -> list[AlertOut]:
        return [
            AlertOut.model_validate(
                {
                    "job_id": job.id,
                    "job_name": job.name,
                    "condition": c,
                    "raised_at": a["raised_at"],
                    "detail": a["detail"],
                }
            )
            for c, a in sorted(job.open_alerts.items())
        ]


class AlertPage(BaseModel):
    items: list[AlertOut] = Field(description="every alert raised and not cleared, by job")
