"""A job and an execution as MongoDB documents and back; BSON dates hold milliseconds."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ticklock.adapters.store.mongo.client import Doc
from ticklock.clock import to_ms
from ticklock.domain.jobs import Execution, ExecutionStatus, Fire, Job, Lease, Trigger
from ticklock.domain.schedules import schedule_from_dict, schedule_to_dict

LIVE = [ExecutionStatus.RUNNING.value, ExecutionStatus.INTERRUPTED.value]  # executions not finished


# BSON dates hold milliseconds: round down so that what we compute equals what we read back
ms = to_ms


def ms_or_none(moment: datetime | None) -> datetime | None:
    return None if moment is None else ms(moment)


def definition_doc(job: Job) -> Doc:
    return {
        "name": job.name,
        "handler": job.handler,
        "schedule": schedule_to_dict(job.schedule),
        # JSON text, not a subdocument: the payload comes back exactly as given on every MongoDB
        # (FerretDB 1.24 refuses nested arrays; BSON has no place for -0 vs 0 in every server's eyes),
        # and the store never queries inside it. Older documents with a subdocument still read.
        "payload": json.dumps(dict(job.payload), ensure_ascii=False, separators=(",", ":")),
        "timeout": job.timeout,
        "max_retries": job.max_retries,
        "enabled": job.enabled,
        "next_run_at": ms_or_none(job.next_run_at),
        "trigger_at": ms_or_none(job.trigger_at),
        "version": job.version,
        "updated_at": ms(job.updated_at),
        "disabled_reason": job.disabled_reason,
    }


def job_doc(job: Job, now: datetime) -> Doc:
    return {
        "_id": job.id,
        **definition_doc(job),
        "due_at": ms_or_none(job.due_at(now)),
        "created_at": ms(job.created_at),
        "seq": 0,
        "lease_token": job.lease.token if job.lease else None,
        "lease_owner": job.lease.owner if job.lease else None,
        "lease_until": ms(job.lease.until) if job.lease else None,
    }


def job_from_doc(doc: Mapping[str, Any]) -> Job:
    lease = Lease(doc["lease_token"], doc["lease_owner"], doc["lease_until"]) if doc.get("lease_token") else None
    return Job(
        id=doc["_id"],
        name=doc["name"],
        handler=doc["handler"],
        schedule=schedule_from_dict(doc["schedule"]),
        payload=json.loads(doc["payload"]) if isinstance(doc["payload"], str) else doc["payload"],
        timeout=doc["timeout"],
        max_retries=doc["max_retries"],
        enabled=doc["enabled"],
        next_run_at=doc.get("next_run_at"),
        trigger_at=doc.get("trigger_at"),
        lease=lease,
        version=doc["version"],
        created_at=doc["created_at"],
        updated_at=doc["updated_at"],
        disabled_reason=doc.get("disabled_reason"),
    )


def execution_doc(e: Execution) -> Doc:
    return {
        "_id": e.id,
        "job_id": e.job_id,
        "fire_key": e.fire_key,
        "handler": e.handler,
        "trigger": e.trigger.value,
        "scheduled_at": ms(e.scheduled_at),
        "started_at": ms(e.started_at),
        "deadline_at": ms(e.deadline_at),
        "run_token": e.run_token,
        "owner": e.owner,
        "status": e.status.value,
        "attempts": e.attempts,
        "resumes": e.resumes,
        "finished_at": ms_or_none(e.finished_at),
        "duration": e.duration,
        "error": e.error,
    }


def execution_from_doc(doc: Mapping[str, Any]) -> Execution:
    return Execution(
        id=doc["_id"],
        job_id=doc["job_id"],
        fire_key=doc["fire_key"],
        handler=doc["handler"],
        trigger=Trigger(doc["trigger"]),
        scheduled_at=doc["scheduled_at"],
        started_at=doc["started_at"],
        deadline_at=doc["deadline_at"],
        run_token=doc["run_token"],
        owner=doc["owner"],
        status=ExecutionStatus(doc["status"]),
        attempts=doc["attempts"],
        resumes=doc["resumes"],
        finished_at=doc.get("finished_at"),
        duration=doc.get("duration"),
        error=doc.get("error"),
    )


def fast_advance(fire: Fire, next_run_at: datetime | None) -> tuple[Doc, Doc]:
    """Filter and update of an advance with no edit and no trigger since the claim."""
    return (
        {"_id": fire.job.id, "lease_token": fire.lease_token, "version": fire.job.version, "trigger_at": None},
        {
            "$set": {
                "lease_token": None,
                "lease_owner": None,
                "lease_until": None,
                "next_run_at": ms_or_none(next_run_at),
                "enabled": next_run_at is not None,
                "due_at": ms_or_none(next_run_at),
            },
            "$inc": {"version": 1, "seq": 1},
        },
    )
