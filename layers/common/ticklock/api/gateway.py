"""API Gateway (REST, proxy integration) events to ``Request`` and ``Reply`` to its response: the API
function answers with the same ``Api`` as ``ticklock serve``."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from ticklock.api.app import Api
from ticklock.api.http import Reply, Request, error


def request_of(event: Mapping[str, Any]) -> Request | Reply:
    """The request an API Gateway proxy event carries (a 400 if its body cannot be decoded). Values of an
    unexpected type are read as text rather than trusted: the event's shape is API Gateway's, not ours."""
    maps = [event.get(key) or {} for key in ("multiValueHeaders", "headers", "multiValueQueryStringParameters",
                                               "queryStringParameters")]  # fmt: skip
    if not all(isinstance(m, Mapping) for m in maps):
        return error(HTTPStatus.BAD_REQUEST, "bad_request", "the event's headers or query are not maps")
    multi_headers, single_headers, multi_query, single_query = maps
    headers: dict[str, str] = {}
    for name, values in multi_headers.items():
        headers[str(name).lower()] = ", ".join(str(v) for v in _listed(values))
    for name, value in single_headers.items():
        headers.setdefault(str(name).lower(), "" if value is None else str(value))
    query: dict[str, list[str]] = {}
    for name, values in multi_query.items():
        if _listed(values):
            query[str(name)] = [str(v) for v in _listed(values)]
    for name, value in single_query.items():
        if value is not None:
            query.setdefault(str(name), [str(value)])
    raw = event.get("body") or ""
    if not isinstance(raw, str):
        return error(HTTPStatus.BAD_REQUEST, "bad_request", "the event's body is not text")
    if event.get("isBase64Encoded"):
        try:
            body = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            return error(HTTPStatus.BAD_REQUEST, "bad_request", "the body is not valid base64")
    else:
        body = raw.encode("utf-8", "surrogatepass")
    return Request(str(event.get("httpMethod") or "GET"), str(event.get("path") or "/"), headers, query, body)


def _listed(values: Any) -> list[Any]:
    return [v for v in values if v is not None] if isinstance(values, list) else []


def response_of(reply: Reply) -> dict[str, Any]:
    text_like = reply.headers.get("content-type", "application/json").startswith(("application/json", "text/"))
    out: dict[str, Any] = {"statusCode": reply.status, "headers": dict(reply.headers)}
    if text_like:
        out["body"] = reply.body.decode("utf-8", "replace")
        out["isBase64Encoded"] = False
    else:
        out["body"] = base64.b64encode(reply.body).decode()
        out["isBase64Encoded"] = True
    return out


def handle_event(api: Api, event: Mapping[str, Any]) -> dict[str, Any]:
    request = request_of(event)
    if isinstance(request, Reply):
        return response_of(request)
    return response_of(api.handle(request))
