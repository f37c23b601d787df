"""The jobs' listing (GET /jobs): its filters, its sort, and the cursor from a page to the next."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from ticklock.api.schemas.fields import STRICT, parse_instant
from ticklock.api.schemas.jobs import JobOut
from ticklock.domain.jobs import Job
from ticklock.errors import InvalidJob
from ticklock.ports import JobQuery

JobSort = Literal[
    "id", "name", "-name", "next_run_at", "-next_run_at", "last_at", "-last_at"
]  # fmt: skip


Outcome = Literal["none", "success", "failed", "timeout", "lost", "cancelled"]


class ListJobsQuery(BaseModel):
    model_config = STRICT
    q: str | None = Field(
        None, min_length=1, max_length=200, description="only jobs whose name or handler contains this (any case)"
    )
    handler: str | None = Field(None, min_length=1, max_length=200, description="only jobs of this handler")
    enabled: bool | None = Field(None, description="only enabled (true) or not enabled (false) jobs")
    state: Literal["enabled", "paused", "held", "disabled", "done", "failing", "alerting"] | None = Field(
        None,
        description="a state (enabled; paused by a user; held until an instant; disabled by ticklock, see "
        "disabled_reason; done: a one-shot job that has fired) or a condition (failing: the last run failed, "
        "timed out or was lost; alerting: an alert raised)",
    )
    outcome: Outcome | None = Field(None, description="only jobs whose last run ended so (none: never ran)")
    sort: JobSort = Field(
        "id", description="the order: by id, name, next fire or last run; a leading '-' for descending"
    )
    limit: int = Field(50, ge=1, le=500)
    after: str | None = Field(None, min_length=1, max_length=400, description="the `next` of the previous page")

    def to_query(self, now: datetime) -> JobQuery:
        """The store's query at ``now``; raises ``InvalidJob`` (a 422 on ``query.after``) for a cursor it
        cannot read."""
        sort = self.sort.lstrip("-")
        return JobQuery(
            search=self.q,
            handler=self.handler,
            enabled=self.enabled,
            state=self.state,
            outcome=self.outcome,
            sort=sort,
            descending=self.sort.startswith("-"),
            after=None if self.after is None else read_cursor(self.after, self.sort),
            at=now,
        )


def job_cursor(job: Job, sort: str) -> str:
    """The ``next`` after ``job`` in a listing by ``sort`` (as given: ``-name``...): its id by id (as before
    sorting existed), else the sort, its value and the id, opaque (base64url of JSON)."""
    key = sort.lstrip("-")
    if key == "id":
        return job.id
    if key == "name":
        value: Any = job.name
    else:
        # by next fire, a job that is not enabled is in the part without a value (``JobQuery``)
        if key == "next_run_at":
            moment = job.next_run_at if job.enabled else None
        else:
            moment = job.last_run.at if job.last_run else None
        value = None if moment is None else moment.isoformat()
    return base64.urlsafe_b64encode(json.dumps([sort, value, job.id]).encode()).decode().rstrip("=")


def read_cursor(text: str, sort: str) -> tuple[Any, str]:
    """The (value, id) a ``job_cursor`` made for ``sort`` holds; ``InvalidJob`` for any other text."""
    if sort == "id":
        return text, text
    problem = "query.after: not a `next` of this listing (pass it back as it came, with the same sort)"
    try:
        made_for, value, job_id = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        if made_for != sort or not isinstance(job_id, str) or not (value is None or isinstance(value, str)):
            raise ValueError(problem)
        if sort.lstrip("-") != "name" and value is not None:
            value = parse_instant(value)
    except (ValueError, TypeError, InvalidJob):
        raise InvalidJob(problem, field="query.after") from None
    return value, job_id


class JobPage(BaseModel):
    items: list[JobOut]
    next: str | None = Field(description="pass as ?after= for the next page; null on the last")
