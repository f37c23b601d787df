"""The routes, declared once: a table that ``ticklock serve`` and the API function both serve, and that
the OpenAPI document is written from. A route's function takes a ``Call`` (path parameters and the
validated query and body) and returns a pydantic model (sent with the route's status) or a ``Reply``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from http import HTTPStatus
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter

from ticklock import __version__
from ticklock.api.http import Reply
from ticklock.api.probes import Probes
from ticklock.api.schemas.alerts import AlertOut, AlertPage
from ticklock.api.schemas.backfill import BackfillFireOut, BackfillIn, BackfillOut
from ticklock.api.schemas.executions import ExecutionOut, ExecutionPage, ExecutionsQuery
from ticklock.api.schemas.fields import parse_instant
from ticklock.api.schemas.fires import AllFiresQuery, FiresQuery, JobFires, LedgerEntryOut, LedgerPage, SlotOut
from ticklock.api.schemas.holds import PauseIn, SkipIn
from ticklock.api.schemas.jobs import JobBatch, JobBatchOut, JobCreate, JobOut, JobPatch
from ticklock.api.schemas.listing import JobPage, ListJobsQuery, job_cursor
from ticklock.api.schemas.overview import OverviewOut, OverviewQuery
from ticklock.api.schemas.schedules import (
    ComingFireOut,
    FireOut,
    PreviewOut,
    PreviewRequest,
    UpcomingOut,
    UpcomingQuery,
)
from ticklock.api.schemas.service import CheckOut, HandlerOut, Health, HealthDetails
from ticklock.api.views import service_overview
from ticklock.domain.alerts import alerting_jobs
from ticklock.domain.executions import ExecutionStatus
from ticklock.domain.schedules import CronSchedule, Schedule, upcoming
from ticklock.domain.service import MAX_BATCH, JobService
from ticklock.domain.upcoming import coming_fires
from ticklock.domain.words import describe
from ticklock.handlers.plugin import HealthCheck

FINAL_STATUSES = tuple(s.value for s in ExecutionStatus if s.final)
# JobBatchOut as plain dicts: the same bytes as the model gives (a test compares them), without building it
_BATCH_OUT = TypeAdapter(dict[str, list[dict[str, Any]]])
MAX_PARAM = 256  # a path parameter longer than this matches no route: no id is this long
# a batch's body at most: under Lambda's 6 MB limit on a synchronous request, which the API function is
# behind and which counts the body escaped inside the event with its headers (a single job's body, if
# configured larger, is taken by the batch route too)
BATCH_BODY_BYTES = 5 * 1000 * 1000


@dataclass(frozen=True)
class Call:
    """What a route function gets."""

    params: dict[str, str]
    query: Any = None
    body: Any = None
    authorized: bool = True  # false only on an open route asked without a valid token


@dataclass(frozen=True)
class Route:
    """One operation. ``store`` says whether it waits on the store (the ASGI front runs those on their own
    threads, so a slow store never delays the others); ``errors`` lists the statuses it can answer with
    besides the ones every route shares; ``open`` routes need no token."""

    method: str
    path: str
    call: Callable[[Call], Any]
    op: str  # the operationId
    summary: str
    status: HTTPStatus = HTTPStatus.OK
    returns: Any = None
    body: type[BaseModel] | None = None
    body_required: bool = True  # False: an empty body reads as {} (every field its default)
    query: type[BaseModel] | None = None
    errors: tuple[HTTPStatus, ...] = ()
    store: bool = True
    open: bool = False
    in_schema: bool = True
    described: dict[int, str] = field(default_factory=dict)
    max_body: int | None = None  # bytes of body taken; None: the API's limit (one job's payload and then some)


@dataclass(frozen=True)
class ApiDeps:
    """What the routes need from the composition root."""

    service: JobService
    render_metrics: Callable[[], bytes] | None = None
    checks: Sequence[HealthCheck] = ()  # the plug-ins' health checks
    dashboard: bool = False  # serve the dashboard's files at /ui (``ticklock serve``; not the API function)


def _preview(schedule: Schedule, count: int, after: datetime) -> PreviewOut:
    zone = schedule.timezone if isinstance(schedule, CronSchedule) else "UTC"
    fires = upcoming(schedule, after=after, count=count)
    return PreviewOut(timezone=zone, description=describe(schedule), fires=[FireOut.of(fire) for fire in fires])


NOT_FOUND = (HTTPStatus.NOT_FOUND,)
WITH_BODY = (HTTPStatus.REQUEST_TIMEOUT, HTTPStatus.REQUEST_ENTITY_TOO_LARGE, HTTPStatus.UNSUPPORTED_MEDIA_TYPE)


def build_routes(deps: ApiDeps, probe: Probes) -> list[Route]:
    service = deps.service

    def create_job(call: Call) -> Reply:
        body: JobCreate = call.body
        job = service.create(body.to_spec())
        out = JobOut.of(job, service.clock.now()).model_dump_json().encode()
        return Reply.json(201, out, {"location": f"/jobs/{job.id}"})

    def create_jobs(call: Call) -> Reply:
        body: JobBatch = call.body
        jobs = service.create_many([item.to_spec() for item in body.jobs])
        # JobBatchOut's shape, written from the jobs just made: they are valid already, and building the
        # models of a large batch only to dump them again is work that buys nothing
        items = [{"id": j.id, "name": j.name, "enabled": j.enabled, "next_run_at": j.next_run_at} for j in jobs]
        return Reply.json(201, _BATCH_OUT.dump_json({"items": items}))

    def list_jobs(call: Call) -> JobPage:
        q: ListJobsQuery = call.query
        now = service.clock.now()
        jobs = service.store.find_jobs(q.to_query(now), limit=q.limit + 1)
        more = len(jobs) > q.limit
        jobs = jobs[: q.limit]
        return JobPage.model_validate(
            {"items": [JobOut.fields(j, now) for j in jobs], "next": job_cursor(jobs[-1], q.sort) if more else None}
        )

    def overview(call: Call) -> OverviewOut:
        q: OverviewQuery = call.query
        return service_overview(service.store, service.clock.now(), q)

    def list_executions(call: Call) -> ExecutionPage:
        q: ExecutionsQuery = call.query
        rows = service.executions(call.params["job_id"], limit=q.limit + 1, before=q.before)
        more = len(rows) > q.limit
        rows = rows[: q.limit]
        return ExecutionPage(items=[ExecutionOut.of(e) for e in rows], next=rows[-1].id if more else None)

    def delete_job(call: Call) -> Reply:
        service.delete(call.params["job_id"])
        return Reply(204)

    def health(call: Call) -> Reply:
        started = time.monotonic()
        problem, checks = probe()
        status = HTTPStatus.OK if problem is None else HTTPStatus.SERVICE_UNAVAILABLE
        word: Literal["ok", "unavailable"] = "ok" if problem is None else "unavailable"
        if not call.authorized:
            return Reply.json(status, {"status": word})
        failing = any(error is not None for error in checks.values())
        details = HealthDetails(
            status="degraded" if word == "ok" and failing else word,
            store=word,
            store_error=problem,
            checks=[CheckOut(name=n, status="ok" if e is None else "failing", error=e) for n, e in checks.items()],
            version=__version__,
        )
        headers = {"server-timing": f"store;dur={(time.monotonic() - started) * 1000:.1f}"}
        return Reply.json(status, details.model_dump_json().encode(), headers)

    def handlers(call: Call) -> list[HandlerOut]:
        return [HandlerOut(name=h.name, description=h.description, is_async=h.is_async) for h in service.registry]

    def get_job(call: Call) -> JobOut:
        return JobOut.of(service.store.get_job(call.params["job_id"]), service.clock.now())

    def patch_job(call: Call) -> JobOut:
        return JobOut.of(service.update(call.params["job_id"], call.body.changes()), service.clock.now())

    def pause_job(call: Call) -> JobOut:
        body: PauseIn = call.body
        until = parse_instant(body.until) if body.until else None
        return JobOut.of(service.pause(call.params["job_id"], note=body.note, until=until), service.clock.now())

    def skip_job(call: Call) -> JobOut:
        body: SkipIn = call.body
        return JobOut.of(service.skip(call.params["job_id"], body.count, note=body.note), service.clock.now())

    def resume_job(call: Call) -> JobOut:
        return JobOut.of(service.resume(call.params["job_id"]), service.clock.now())

    def trigger_job(call: Call) -> JobOut:
        return JobOut.of(service.trigger(call.params["job_id"]), service.clock.now())

    def upcoming_fires(call: Call) -> UpcomingOut:
        q: UpcomingQuery = call.query
        job = service.store.get_job(call.params["job_id"])
        schedule = job.schedule
        fires = coming_fires(job, service.clock.now(), q.count, parse_instant(q.after) if q.after else None)
        return UpcomingOut(
            timezone=schedule.timezone if isinstance(schedule, CronSchedule) else "UTC",
            description=describe(schedule),
            fires=[ComingFireOut.of_coming(f) for f in fires],
        )

    def job_fires(call: Call) -> JobFires:
        q: FiresQuery = call.query
        start, end = q.window(service.clock.now())
        fates = service.fires(call.params["job_id"], start=start, end=end, limit=q.limit)
        return JobFires.model_validate(
            {"job_id": call.params["job_id"], "from": start, "to": end, "items": [SlotOut.of(f) for f in fates]}
        )

    def all_fires(call: Call) -> LedgerPage:
        q: AllFiresQuery = call.query
        start, end = q.window(service.clock.now())
        items: list[LedgerEntryOut] = []
        if q.status in (None, "skipped", "missed"):
            entries = service.store.list_fires(
                None, start=start, end=end, outcome=q.status, reason=q.reason, limit=q.limit
            )
            items += [LedgerEntryOut.of(e) for e in entries]
        if q.status not in ("skipped", "missed") and q.reason is None:
            statuses = FINAL_STATUSES if q.status in (None, "ran") else (q.status,)
            runs = service.store.executions_between(None, start=start, end=end, limit=q.limit, statuses=statuses)
            items += [LedgerEntryOut.ran(e) for e in runs]
        items.sort(key=lambda i: i.first_at, reverse=True)
        return LedgerPage(items=items[: q.limit])

    def backfill_job(call: Call) -> BackfillOut:
        body: BackfillIn = call.body
        job, fires = service.backfill(
            call.params["job_id"],
            start=parse_instant(body.from_),
            end=parse_instant(body.to),
            overlap=body.overlap,
            dry_run=body.dry_run,
        )
        return BackfillOut(
            job_id=job.id,
            dry_run=body.dry_run,
            count=sum(not done for _, done in fires),
            fires=[BackfillFireOut(at=at, backfilled=done) for at, done in fires],
            pending=None if job.backfill is None else job.backfill.to_dict(),
        )

    def open_alerts(call: Call) -> AlertPage:
        return AlertPage(items=[a for job in alerting_jobs(service.store) for a in AlertOut.all_of(job)])

    def preview(call: Call) -> PreviewOut:
        body: PreviewRequest = call.body
        after = parse_instant(body.after) if body.after else service.clock.now()
        return _preview(body.schedule.to_domain(), body.count, after)

    job = "/jobs/{job_id}"
    conflict = (HTTPStatus.CONFLICT,)
    routes = [
        Route("POST", "/jobs", create_job, "createJob", "Create a job", status=HTTPStatus.CREATED, returns=JobOut,
              body=JobCreate, errors=(*conflict, *WITH_BODY)),
        Route("POST", "/jobs:batch", create_jobs, "createJobs",
              f"Create up to {MAX_BATCH} jobs, all or none: every job at fault is named in the error's details",
              status=HTTPStatus.CREATED, returns=JobBatchOut, body=JobBatch, errors=(*conflict, *WITH_BODY),
              max_body=BATCH_BODY_BYTES),
        Route("GET", "/jobs", list_jobs, "listJobs", "List jobs: search, filter by state or last outcome, sort, page",
              returns=JobPage, query=ListJobsQuery),
        Route("GET", job, get_job, "getJob", "Get a job", returns=JobOut, errors=NOT_FOUND),
        Route("PATCH", job, patch_job, "patchJob", "Change the fields given; a new schedule restarts from now",
              returns=JobOut, body=JobPatch, errors=(*NOT_FOUND, *conflict, *WITH_BODY)),
        Route("DELETE", job, delete_job, "deleteJob", "Delete a job and its history",
              status=HTTPStatus.NO_CONTENT, errors=NOT_FOUND),
        Route("POST", f"{job}/pause", pause_job, "pauseJob",
              "Stop scheduling a job, with a note: until it is resumed, or until an instant", returns=JobOut,
              body=PauseIn, body_required=False, errors=(*NOT_FOUND, *conflict, *WITH_BODY)),
        Route("POST", f"{job}/skip", skip_job, "skipJob", "Skip a job's next fires, with a note", returns=JobOut,
              body=SkipIn, errors=(*NOT_FOUND, *conflict, *WITH_BODY)),
        Route("POST", f"{job}/resume", resume_job, "resumeJob",
              "Schedule a paused or held job again, from now", returns=JobOut, errors=(*NOT_FOUND, *conflict)),
        Route("POST", f"{job}/trigger", trigger_job, "triggerJob", "Run a job now, without moving its schedule",
              status=HTTPStatus.ACCEPTED, returns=JobOut, errors=(*NOT_FOUND, *conflict)),
        Route("POST", f"{job}/backfill", backfill_job, "backfillJob",
              "Run the fires of a past window of a job's schedule again, each once", status=HTTPStatus.ACCEPTED,
              returns=BackfillOut, body=BackfillIn, errors=(*NOT_FOUND, *conflict, *WITH_BODY)),
        Route("GET", f"{job}/executions", list_executions, "listExecutions", "A job's executions, newest fire first",
              returns=ExecutionPage, query=ExecutionsQuery, errors=NOT_FOUND),
        Route("GET", f"{job}/upcoming", upcoming_fires, "upcomingFires",
              "A job's fires to come as the engine will run them: from the fire it waits for, with what a pause, "
              "a hold or a skip keeps back marked, and each marked when a clock change moves it", returns=UpcomingOut,
              query=UpcomingQuery, errors=NOT_FOUND),
        Route("GET", f"{job}/fires", job_fires, "listJobFires",
              "What became of every fire of a job in a window: each slot of its schedule and each fire, newest first",
              returns=JobFires, query=FiresQuery, errors=NOT_FOUND),
        Route("GET", "/fires", all_fires, "listFires",
              "Every job's fires in a window: those that did not run (skipped, missed) with their reasons, and runs",
              returns=LedgerPage, query=AllFiresQuery),
        Route("GET", "/overview", overview, "overview",
              "The service at a glance: jobs by state, the last hour's fires by outcome, dispatch lag, the latest "
              "failures and the open alerts", returns=OverviewOut, query=OverviewQuery),
        Route("GET", "/alerts", open_alerts, "listAlerts", "Every job's alerts raised and not cleared",
              returns=AlertPage),
        Route("POST", "/schedules/preview", preview, "previewSchedule",
              "The next fires of a schedule that is not saved, each marked when a clock change moves it",
              returns=PreviewOut, body=PreviewRequest, errors=WITH_BODY, store=False),
        Route("GET", "/handlers", handlers, "listHandlers", "The registered handlers", returns=list[HandlerOut],
              store=False),
        Route("GET", "/health", health, "health", "Whether the service and its store answer",
              returns=HealthDetails | Health, store=False, open=True,
              described={200: "the store answers", 503: "the store does not answer"}),
    ]  # fmt: skip
    if deps.render_metrics is not None:
        render = deps.render_metrics
        routes.append(
            Route(
                "GET",
                "/metrics",
                lambda c: Reply(200, render(), {"content-type": "text/plain; version=0.0.4; charset=utf-8"}),
                "metrics",
                "Prometheus metrics",
                store=False,
                in_schema=False,
            )
        )
    return routes
