"""The routes, as one powertools ``Router`` that any resolver can include."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from ticklock.api.schemas import ExecutionOut, ExecutionPage, HandlerOut, JobCreate, JobOut, JobPage, JobPatch
from ticklock.domain.service import JobService, JobSpec
from ticklock.errors import StoreUnavailable


@dataclass(frozen=True)
class ApiDeps:
    """What the routes need from the composition root."""

    service: JobService
    render_metrics: Callable[[], bytes] | None = None


def build_router(deps: ApiDeps) -> Router:
    router = Router()
    service = deps.service

    @router.post("/jobs", summary="Create a job")
    def create_job(body: Annotated[JobCreate, Body()]) -> Response[JobOut]:
        spec = JobSpec(
            name=body.name,
            handler=body.handler,
            schedule=body.schedule.to_domain(),
            payload=body.payload,
            timeout=body.timeout,
            max_retries=body.max_retries,
            enabled=body.enabled,
        )
        job = service.create(spec)
        return Response(
            HTTPStatus.CREATED.value, "application/json", JobOut.of(job), headers={"Location": f"/jobs/{job.id}"}
        )

    @router.get("/jobs", summary="List jobs")
    def list_jobs(
        handler: Annotated[str | None, Query(max_length=200)] = None,
        enabled: Annotated[bool | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        after: Annotated[str | None, Query(max_length=64)] = None,
    ) -> JobPage:
        jobs = service.store.list_jobs(handler=handler, enabled=enabled, limit=limit + 1, after=after)
        more = len(jobs) > limit
        jobs = jobs[:limit]
        return JobPage(items=[JobOut.of(j) for j in jobs], next=jobs[-1].id if more else None)

    @router.get("/jobs/<job_id>", summary="Get a job")
    def get_job(job_id: str) -> JobOut:
        return JobOut.of(service.store.get_job(job_id))

    @router.patch("/jobs/<job_id>", summary="Change a job (only the fields given)")
    def patch_job(job_id: str, body: Annotated[JobPatch, Body()]) -> JobOut:
        return JobOut.of(service.update(job_id, body.changes()))

    @router.delete("/jobs/<job_id>", summary="Delete a job and its history")
    def delete_job(job_id: str) -> Response[Any]:
        service.delete(job_id)
        return Response(HTTPStatus.NO_CONTENT.value)

    @router.post("/jobs/<job_id>/pause", summary="Stop scheduling a job")
    def pause_job(job_id: str) -> JobOut:
        return JobOut.of(service.pause(job_id))

    @router.post("/jobs/<job_id>/resume", summary="Schedule a paused job again, from now")
    def resume_job(job_id: str) -> JobOut:
        return JobOut.of(service.resume(job_id))

    @router.post("/jobs/<job_id>/trigger", summary="Run a job now, without moving its schedule")
    def trigger_job(job_id: str) -> Response[JobOut]:
        return Response(HTTPStatus.ACCEPTED.value, "application/json", JobOut.of(service.trigger(job_id)))

    @router.get("/jobs/<job_id>/executions", summary="A job's executions, newest first")
    def list_executions(
        job_id: str,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        before: Annotated[str | None, Query(max_length=64)] = None,
    ) -> ExecutionPage:
        rows = service.executions(job_id, limit=limit + 1, before=before)
        more = len(rows) > limit
        rows = rows[:limit]
        return ExecutionPage(items=[ExecutionOut.of(e) for e in rows], next=rows[-1].id if more else None)

    @router.get("/handlers", summary="Registered handlers")
    def list_handlers() -> list[HandlerOut]:
        return [HandlerOut(name=h.name, description=h.description, is_async=h.is_async) for h in service.registry]

    @router.get("/health", summary="Liveness and store reachability")
    def health() -> Response[dict[str, str]]:
        try:
            service.store.ping()
        except StoreUnavailable as exc:
            return Response(
                HTTPStatus.SERVICE_UNAVAILABLE.value, "application/json", {"status": "unavailable", "store": str(exc)}
            )
        return Response(HTTPStatus.OK.value, "application/json", {"status": "ok", "store": "ok"})

    if deps.render_metrics is not None:
        render = deps.render_metrics

        @router.get("/metrics", include_in_schema=False)
        def metrics() -> Response[str]:
            return Response(HTTPStatus.OK.value, "text/plain; version=0.0.4; charset=utf-8", render().decode())

    return router
