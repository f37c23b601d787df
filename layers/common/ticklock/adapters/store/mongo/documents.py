"""A job and an execution as MongoDB documents and back: the shared records (``adapters/records.py``) under
``_id``, with times as BSON dates (milliseconds) and the payload as JSON text."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ticklock.adapters.records import (
    DEFINITION_FIELDS,
    Times,
    execution_from_record,
    execution_record,
    job_from_record,
    job_record,
)
from ticklock.adapters.store.mongo.client import Doc
from ticklock.clock import to_ms
from ticklock.domain.executions import Execution, ExecutionStatus
from ticklock.domain.fires import Fire, Trigger
from ticklock.domain.jobs import Job

LIVE = [ExecutionStatus.RUNNING.value, ExecutionStatus.INTERRUPTED.value]  # executions not finished


# BSON dates hold milliseconds: round down so that what we compute equals what we read back
ms = to_ms


def ms_or_none(moment: datetime | None) -> datetime | None:
    return None if moment is None else ms(moment)


MILLIS = Times(ms, lambda value: value)  # pymongo (tz_aware) reads BSON dates back as aware datetimes


def _payload_text(payload: Mapping[str, Any]) -> str:
    # JSON text, not a subdocument: the payload comes back exactly as given on every MongoDB (FerretDB 1.24
    # refuses nested arrays; BSON has no place for -0 vs 0 in every server's eyes), and the store never
    # queries inside it. Older documents with a subdocument still read.
    return json.dumps(dict(payload), ensure_ascii=False, separators=(",", ":"))  # any Mapping, as a JSON object


def _payload_from(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def definition_doc(job: Job) -> Doc:
    """The fields a change to a job's definition sets (``DEFINITION_FIELDS`` of the shared record)."""
    record = job_record(job, MILLIS, payload=_payload_text)
    return {field: record[field] for field in DEFINITION_FIELDS}


def _present(doc: Doc) -> Doc:
    """``doc`` without its null fields. A null and a missing field are one to MongoDB's queries (``{f: null}``
    matches both), sorts and indexes, and to the readers (``records.py`` reads with ``.get``); a document
    without them is smaller. On FerretDB 1.24 / PostgreSQL that is most of a fire's cost: every find or
    update by ``_id`` reads the whole collection (no index serves its filter), and a job with its 12 null
    fields is over PostgreSQL's 2 KB compression threshold, so each row read is decompressed first."""
    return {field: value for field, value in doc.items() if value is not None}


def setting(fields: Doc) -> Doc:
    """The update operators that give ``fields`` their values: ``$set`` for the values, ``$unset`` for the
    nulls, so that a document written since stays as ``_present`` made it (never an empty operator)."""
    update: Doc = {}
    values = _present(fields)
    if values:
        update["$set"] = values
    if len(values) < len(fields):
        update["$unset"] = {name: "" for name, value in fields.items() if value is None}
    return update


def job_doc(job: Job, now: datetime) -> Doc:
    """The whole document: the shared record under ``_id``, with ``due_at`` and ``seq`` (claims' counter);
    null fields left out (``_present``)."""
    record = job_record(job, MILLIS, payload=_payload_text)
    return _present({"_id": record.pop("id"), **record, "due_at": ms_or_none(job.due_at(now)), "seq": 0})


def job_from_doc(doc: Mapping[str, Any]) -> Job:
    return job_from_record({**doc, "id": doc["_id"]}, MILLIS, payload=_payload_from)


def execution_doc(e: Execution) -> Doc:
    """The execution under ``_id``, null fields left out (``_present``: a running one has no end yet)."""
    record = execution_record(e, MILLIS)
    return _present({"_id": record.pop("id"), **record})


def execution_from_doc(doc: Mapping[str, Any]) -> Execution:
    return execution_from_record({**doc, "id": doc["_id"]}, MILLIS)


def fast_path(fire: Fire) -> bool:
    """Whether ``fire``'s advance may take the one-command path: a scheduled fire of a job with no backfill
    pending at the claim (a backfill's next slot is part of the due time, which the slow path computes)."""
    return fire.trigger is Trigger.SCHEDULE and fire.job.backfill is None


def fast_advance(fire: Fire, next_run_at: datetime | None, summary: Execution | None = None) -> tuple[Doc, Doc]:
    """Filter and update of an advance with no edit and no trigger since the claim; with ``summary``, that
    finished run counted in the same update (``summary_update``), marked by its run token so that a
    bulk write's caller can tell whether this update was the one applied."""
    where: Doc = {"_id": fire.job.id, "lease_token": fire.lease_token, "version": fire.job.version, "trigger_at": None}
    fields: Doc = {
        "lease_token": None,
        "lease_owner": None,
        "lease_until": None,
        "next_run_at": ms_or_none(next_run_at),
        "enabled": next_run_at is not None,
        "due_at": ms_or_none(fire.job.jittered(next_run_at)),
    }
    inc = {"version": 1, "seq": 1}
    if summary is not None:
        at, counted = summary_update(summary)
        # the last run unless a later one is recorded (never so for one job's runs in turn; else: slow path)
        where.update(no_later_run(at))
        fields.update(last_status=summary.status.value, last_at=at, last_run_token=summary.run_token)
        inc.update(counted)
    return where, {**setting(fields), "$inc": inc}


def no_later_run(at: datetime) -> Doc:
    """The filter of a job whose summary holds no run later than ``at`` (it may become the last)."""
    return {"$or": [{"last_at": None}, {"last_at": {"$lte": at}}]}


def summary_update(execution: Execution) -> tuple[datetime, dict[str, int]]:
    """When a finished run counts as having happened, and the counters it adds to its job's summary."""
    at = ms(execution.finished_at or execution.started_at)
    return at, {"runs": 1, "runs_ok": int(execution.status is ExecutionStatus.SUCCESS)}
