"""Exceptions to HTTP statuses, in one place. Every error body is ``{"error", "message", "details"}``."""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)

from ticklock.errors import (
    ConflictError,
    DuplicateJobName,
    InvalidJob,
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


class Unauthorized(Exception):
    """The request carries no valid bearer token."""


def error(
    status: HTTPStatus,
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> Response[str]:
    body = json.dumps({"error": code, "message": message, "details": details or []})
    return Response(status_code=status.value, content_type="application/json", body=body, headers=headers)


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc if p not in ("body",)]
    # discriminated unions put the tag in the path ("schedule.cron.expr"): keep it, it says which shape
    return ".".join(parts) or "body"


def _describe(err: dict[str, Any]) -> str:
    kind = err.get("type", "")
    if kind == "json_invalid":
        return "the body is not valid JSON"
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not a known field"
    msg = str(err.get("msg", kind))
    return msg.removeprefix("Value error, ")


def _not_json(kind: str) -> Response[str]:
    return error(
        HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        f"send the body as JSON with 'Content-Type: application/json' (got {kind or 'no content type'!r})",
    )


def install(app: ApiGatewayResolver) -> None:
    """Register the exception handlers on a resolver."""

    @app.exception_handler(RequestValidationError)
    def _validation(exc: RequestValidationError) -> Response[str]:
        event = app.current_event
        if event.body:
            headers = {k.lower(): v for k, v in (event.headers or {}).items()}
            kind = headers.get("content-type", "").split(";")[0].strip().lower()
            if kind != "application/json" and not kind.endswith("+json"):
                # Without this, a form body (curl's default) reads as a baffling list of missing fields.
                return error(
                    HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                    "unsupported_media_type",
                    f"send the body as JSON with 'Content-Type: application/json' (got {kind or 'no content type'!r})",
                )
        details = [
            {"field": _field(e.get("loc", ())), "message": _describe(e), "type": e.get("type")} for e in exc.errors()
        ]
        if any(d["type"] == "json_invalid" for d in details):
            return error(
                HTTPStatus.BAD_REQUEST,
                "malformed_json",
                "the request body is not valid JSON",
                [{"field": "body", "message": "not valid JSON", "type": "json_invalid"}],
            )
        first = details[0] if details else {"field": "body", "message": "invalid"}
        return error(
            HTTPStatus.UNPROCESSABLE_ENTITY, "validation_error", f"{first['field']}: {first['message']}", details
        )

    @app.exception_handler(RequestUnsupportedContentType)
    def _unsupported(exc: RequestUnsupportedContentType) -> Response[str]:
        headers = {k.lower(): v for k, v in (app.current_event.headers or {}).items()}
        return _not_json(headers.get("content-type", "").split(";")[0].strip().lower())

    @app.exception_handler(TicklockError)
    def _domain(exc: TicklockError) -> Response[str]:
        for kind in type(exc).__mro__:
            if kind in STATUS:
                status, code = STATUS[kind]
                break
        else:
            status, code = HTTPStatus.INTERNAL_SERVER_ERROR, "internal"
        details = [{"field": exc.field, "message": exc.message}] if isinstance(exc, InvalidJob) else []
        message = f"{exc.field}: {exc.message}" if isinstance(exc, InvalidJob) else exc.message
        return error(status, code, message, details)

    @app.exception_handler(Unauthorized)
    def _unauthorized(exc: Unauthorized) -> Response[str]:
        return error(HTTPStatus.UNAUTHORIZED, "unauthorized", str(exc), headers={"WWW-Authenticate": "Bearer"})

    @app.not_found
    def _not_found(exc: NotFoundError) -> Response[str]:
        return error(HTTPStatus.NOT_FOUND, "not_found", "no such route")

    @app.exception_handler(Exception)
    def _unexpected(exc: Exception) -> Response[str]:
        log.exception("api.error")
        return error(HTTPStatus.INTERNAL_SERVER_ERROR, "internal", "internal error; see the service log")
