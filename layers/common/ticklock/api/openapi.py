"""The OpenAPI 3.1 document, written from the route table so that it cannot drift from what is served:
every status an operation can answer with (and the one error schema), the exact request schemas, the
handler names this process has registered, and security only where a token is asked for."""

from __future__ import annotations

import types
import typing
from http import HTTPStatus
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from ticklock import __version__
from ticklock.api.routes import MAX_PARAM, Route
from ticklock.api.schemas.errors import ErrorBody
from ticklock.api.schemas.jobs import JobOut
from ticklock.domain.job_rules import INT64_RANGE, MAX_PAYLOAD_DEPTH
from ticklock.domain.service import JobService

REF = "#/components/schemas/{model}"
# Answers any route can give: a query that cannot be decoded (400) or is not declared (422), a full
# server (503 with Retry-After), a bug (500, an incident id). Routes add their own.
COMMON = (HTTPStatus.BAD_REQUEST, HTTPStatus.UNPROCESSABLE_ENTITY, HTTPStatus.INTERNAL_SERVER_ERROR,
          HTTPStatus.SERVICE_UNAVAILABLE)  # fmt: skip
WHY = {
    400: "malformed request: the body is not UTF-8 JSON, or the query cannot be decoded",
    401: "no valid bearer token",
    404: "no such job",
    408: "the body did not arrive in time",
    409: "conflicts with the job's state or another job's name",
    413: "the body is over the size limit",
    415: "the body is not declared as JSON",
    422: "a field is invalid; each detail names one",
    500: "a bug: the message carries an incident id to find in the log",
    503: "overloaded or the store is not answering; see Retry-After",
}
# The payload a handler gets: any JSON object within the store rule (see JobService).
PAYLOAD_VALUE: dict[str, Any] = {
    "anyOf": [
        {"type": "null"},
        {"type": "boolean"},
        {"type": "integer", "minimum": INT64_RANGE[0], "maximum": INT64_RANGE[1]},
        # any finite number; JSON Schema counts 1e300 as an integer too, so no "not integer" here: a
        # 20-digit integer written without exponent is the one number the schema allows and the API refuses
        {"type": "number"},
        {"type": "string"},
        {"type": "array", "items": {"$ref": "#/components/schemas/PayloadValue"}},
        {"$ref": "#/components/schemas/Payload"},
    ]
}
PAYLOAD: dict[str, Any] = {
    "type": "object",
    "description": "a JSON object handed to the handler; keys are not empty, do not start with '$' and hold no "
    f"'.' or NUL; integers fit 64 bits; at most {MAX_PAYLOAD_DEPTH} levels deep and the configured size as JSON",
    "propertyNames": {"pattern": "^[^$.\\u0000][^.\\u0000]*$"},
    "additionalProperties": {"$ref": "#/components/schemas/PayloadValue"},
}
LINKED = {"getJob", "patchJob", "deleteJob", "pauseJob", "resumeJob", "triggerJob", "listExecutions"}


def document(routes: list[Route], service: JobService, *, secured: bool) -> dict[str, Any]:
    models: set[tuple[type[BaseModel], JsonSchemaMode]] = {(ErrorBody, "serialization")}
    for route in routes:
        if route.body is not None:
            models.add((route.body, "validation"))
        models.update((m, "serialization") for m in _models(route.returns))
    keys, top = models_json_schema(sorted(models, key=lambda m: (m[0].__name__, m[1])), ref_template=REF)
    schemas: dict[str, Any] = top.get("$defs", {})
    schemas["Payload"], schemas["PayloadValue"] = PAYLOAD, PAYLOAD_VALUE
    names = [h.name for h in service.registry]
    for name in ("JobCreate", "JobPatch"):
        props = schemas[name]["properties"]
        props["payload"] = {"$ref": "#/components/schemas/Payload"}
        props["handler"] = {"type": "string", "enum": names, "description": "a registered handler"}
        props["timeout"]["maximum"] = service.limits.max_timeout
    ref = {model: keys[(model, mode)] for model, mode in models}
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        if route.in_schema:
            paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, ref, secured=secured)
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "ticklock", "version": __version__, "description": "Jobs, schedules and execution history."},
        "paths": paths,
        "components": {"schemas": schemas},
    }
    if secured:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    return doc


def _operation(route: Route, ref: dict[type[BaseModel], Any], *, secured: bool) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": route.op, "summary": route.summary}
    params = [_path_param(name) for name in _path_names(route.path)]
    if route.query is not None:
        params += _query_params(route.query)
    if params:
        op["parameters"] = params
    if route.body is not None:
        op["requestBody"] = {
            "required": route.body_required,
            "content": {"application/json": {"schema": ref[route.body]}},
        }
    responses: dict[str, Any] = {}
    body_schema = _schema(route.returns, ref)
    ok: dict[str, Any] = {"description": route.described.get(route.status.value, route.summary)}
    if body_schema is not None:
        ok["content"] = {"application/json": {"schema": body_schema}}
    if route.status == HTTPStatus.CREATED and route.returns is JobOut:  # one new job: its path, and links on
        ok["headers"] = {"Location": {"schema": {"type": "string"}, "description": "the new job's path"}}
        ok["links"] = {
            name[0].upper() + name[1:]: {"operationId": name, "parameters": {"job_id": "$response.body#/id"}}
            for name in sorted(LINKED)
        }
    responses[str(route.status.value)] = ok
    statuses = {*COMMON, *route.errors}
    if secured and not route.open:
        statuses.add(HTTPStatus.UNAUTHORIZED)
        op["security"] = [{"bearer": []}]
    elif secured:
        op["security"] = []
    for status in sorted(statuses):
        if route.open and status.value in route.described:
            responses[str(status.value)] = {
                "description": route.described[status.value],
                "content": {"application/json": {"schema": body_schema}},
            }
            continue
        responses[str(status.value)] = {
            "description": WHY[status.value],
            "content": {"application/json": {"schema": ref[ErrorBody]}},
        }
    op["responses"] = responses
    return op


def _models(tp: Any) -> list[type[BaseModel]]:
    if tp is None:
        return []
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for arg in typing.get_args(tp) for m in _models(arg)]


def _schema(tp: Any, ref: dict[type[BaseModel], Any]) -> dict[str, Any] | None:
    if tp is None:
        return None
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return dict(ref[tp])
    if typing.get_origin(tp) is list:
        return {"type": "array", "items": _schema(typing.get_args(tp)[0], ref)}
    if isinstance(tp, types.UnionType):
        return {"anyOf": [_schema(arg, ref) for arg in typing.get_args(tp)]}
    raise TypeError(f"no schema for {tp!r}")


def _query_params(model: type[BaseModel]) -> list[dict[str, Any]]:
    schema = model.model_json_schema()
    required = set(schema.get("required", []))
    params = []
    for name, prop in schema["properties"].items():
        prop = dict(prop)
        # a query value is never null: "absent" is how a client says none
        branches = [b for b in prop.pop("anyOf", []) if b.get("type") != "null"]
        if branches:
            prop.update(branches[0])
        if prop.get("default") is None:
            prop.pop("default", None)
        prop.pop("title", None)
        description = prop.pop("description", None)
        param: dict[str, Any] = {"name": name, "in": "query", "required": name in required, "schema": prop}
        if description:
            param["description"] = description
        params.append(param)
    return params


def _path_param(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": {"type": "string", "minLength": 1, "maxLength": MAX_PARAM, "pattern": "^[^/]+$"},
    }


def _path_names(path: str) -> list[str]:
    return [part[1:-1] for part in path.split("/") if part.startswith("{")]


def swagger_page() -> bytes:
    """Swagger UI for /openapi.json (its scripts come from a CDN, as powertools' page did)."""
    return b"""<!doctype html>
<html><head><meta charset="utf-8"><title>ticklock API</title>
<link rel="stylesheet" href="https://unpkg.com/swagger-ui-dist@5/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="https://unpkg.com/swagger-ui-dist@5/swagger-ui-bundle.js"></script>
<script>SwaggerUIBundle({url: "/openapi.json", dom_id: "#ui"});</script>
</body></html>
"""
