"""Exceptions to HTTP statuses, in one place. Every error body is ``{"error", "message", "details"}``."""

from __future__ import annotations

import logging
import uuid
from http import HTTPStatus
from typing import Any

from pydantic import ValidationError

from ticklock.api.http import Reply, error
from ticklock.errors import (
    ConflictError,
    DuplicateJobName,
    InvalidJob,
    InvalidJobs,
    JobNotFound,
    StoreUnavailable,
    TicklockError,
)

log = logging.getLogger("ticklock.api")

STATUS: dict[type[TicklockError], tuple[HTTPStatus, str]] = {
    InvalidJob: (HTTPStatus.UNPROCESSABLE_ENTITY, "invalid_job"),
    JobNotFound: (HTTPStatus.NOT_FOUND, "not_found"),
    DuplicateJobName: (HTTPStatus.CONFLICT, "duplicate_name"),
    ConflictError: (HTTPStatus.CONFLICT, "conflict"),
    StoreUnavailable: (HTTPStatus.SERVICE_UNAVAILABLE, "store_unavailable"),
}
RETRY_AFTER = "1"


def from_domain(exc: TicklockError) -> Reply:
    """A domain error as its status and code; the message is the exception's own."""
    for kind in type(exc).__mro__:
        if kind in STATUS:
            status, code = STATUS[kind]
            break
    else:
        return internal(exc)
    if isinstance(exc, InvalidJobs):
        details = [{"field": p.field, "message": _unnamed(p)} for p in exc.problems]
        return error(status, code, f"{exc.field}: {_unnamed(exc)}", details)
    if isinstance(exc, InvalidJob):
        return error(status, code, f"{exc.field}: {_unnamed(exc)}", [{"field": exc.field, "message": _unnamed(exc)}])
    if isinstance(exc, DuplicateJobName):  # said beside the field, as a 422's details are
        return error(status, code, exc.message, [{"field": "name", "message": exc.message}])
    if isinstance(exc, StoreUnavailable):
        # The driver's words (hosts, topology) go to the log, not to the client.
        log.warning("api.store_unavailable", extra={"error": exc.message})
        return error(status, code, "the job store is not answering; try again shortly", headers=_retry())
    return error(status, code, exc.message)


def from_validation(exc: ValidationError, where: str) -> Reply:
    """pydantic's errors as 422 details, each naming its field (``schedule.cron.expr``, ``query.limit``)."""
    details = [{"field": _field(where, e.get("loc", ())), "message": _describe(e)} for e in exc.errors()]
    first = details[0] if details else {"field": where, "message": "is invalid"}
    return error(HTTPStatus.UNPROCESSABLE_ENTITY, "validation_error", f"{first['field']}: {first['message']}", details)


def internal(exc: BaseException) -> Reply:
    """A bug: logged once with an id, and the body carries only that id."""
    incident = uuid.uuid4().hex[:16]
    log.error("api.error", exc_info=exc, extra={"incident": incident})
    return error(HTTPStatus.INTERNAL_SERVER_ERROR, "internal", f"internal error {incident}; see the service log")


def overloaded(limit: int) -> Reply:
    return error(
        HTTPStatus.SERVICE_UNAVAILABLE,
        "overloaded",
        f"{limit} requests are in flight already; try again shortly",
        headers=_retry(),
    )


def _unnamed(exc: InvalidJob) -> str:
    # a message that names its field already ("query.from: ...") would name it twice
    return exc.message.removeprefix(f"{exc.field}: ")


def _retry() -> dict[str, str]:
    return {"retry-after": RETRY_AFTER}


def _field(where: str, loc: tuple[Any, ...] | list[Any]) -> str:
    # discriminated unions put the tag in the path ("schedule.cron.expr"): keep it, it says which shape
    parts = [str(p)[:100] for p in loc]
    if where != "body":
        parts.insert(0, where)
    return ".".join(parts) or where


def _describe(err: Any) -> str:
    kind = err.get("type", "")
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a known field"
    msg = str(err.get("msg", kind))
    return msg.removeprefix("Value error, ")
