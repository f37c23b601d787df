"""The API as one function of a ``Request``: ``Api.handle`` answers every request both runtimes get.

Why not powertools' resolvers: their request state is a class attribute (``BaseRouter.current_event``,
shared by every resolver in the process), so two requests on two threads read each other's event, and
its ASGI adapter runs synchronous middlewares on executor threads that wait for the event loop (the
deadlock seen with a dozen concurrent clients; upstream issues 8187 and 8451). ``Api`` keeps all state
in locals, so any number of threads may call ``handle`` at once.

The order of checks is fixed, so a client learns no more than its credentials allow: the token
(without it, a plain GET of ``/health`` says ok or unavailable and anything else is a 401, before the
path is even looked up), then the route
(404, 405 with ``Allow``; HEAD wherever GET is), then the query, the content type and the JSON body
(400 / 415 / 422), then the route itself. A bug is a 500 whose body carries only an incident id.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Iterable
from http import HTTPStatus
from typing import Any

from pydantic import BaseModel, ValidationError

from ticklock.api import dashboard, errors
from ticklock.api.http import BadJson, Reply, Request, error, read_json
from ticklock.api.openapi import document, swagger_page
from ticklock.api.probes import Probes
from ticklock.api.routes import MAX_PARAM, ApiDeps, Call, Route, build_routes
from ticklock.errors import TicklockError

_JSON_TYPE = re.compile(r"application/(?:[\w.+-]+\+)?json", re.ASCII)


class Api:
    """The routes with their checks. Thread-safe; holds nothing per request."""

    def __init__(self, deps: ApiDeps, *, api_token: str | None, max_body_bytes: int) -> None:
        self.max_body_bytes = max_body_bytes
        self._token = f"Bearer {api_token}".encode() if api_token else None
        self.probe = Probes(deps.service.store, deps.checks)
        self.routes = build_routes(deps, self.probe)
        self.openapi = document(self.routes, deps.service, secured=api_token is not None)
        spec = json.dumps(self.openapi).encode()
        self.routes += [
            Route("GET", "/openapi.json", lambda c: Reply.json(200, spec), "openapi", "",
                  store=False, in_schema=False),
            Route("GET", "/swagger", lambda c: Reply(200, swagger_page(), {"content-type": "text/html"}), "swagger", "",
                  store=False, in_schema=False),
        ]  # fmt: skip
        if deps.dashboard:
            self.routes += dashboard.routes()
        self._paths: list[tuple[re.Pattern[str], dict[str, Route]]] = []
        for route in self.routes:
            pattern = _compile(route.path)
            for known, methods in self._paths:
                if known.pattern == pattern.pattern:
                    methods[route.method] = route
                    break
            else:
                self._paths.append((pattern, {route.method: route}))
        self._open = frozenset(r.path for r in self.routes if r.open)

    def body_limit(self, route: Route) -> int:
        """The most bytes of body ``route`` takes."""
        return max(route.max_body or 0, self.max_body_bytes)

    def close(self) -> None:
        """Stop the health probe's thread (a ping still hanging is left to end by itself)."""
        self.probe.close()

    def handle(self, request: Request) -> Reply:
        """Answer one request; never raises."""
        try:
            return self._handle(request)
        except Exception as exc:  # noqa: BLE001 - the last line: a bug is a 500 with an incident id
            return errors.internal(exc)

    def gate(self, request: Request) -> Reply | tuple[Route, bool]:
        """What a request gets before its query and body are read: a 401 / 404 / 405 / OPTIONS answer,
        or the route it reaches and whether it carries the token."""
        resolved = self._resolve(request)
        return resolved if isinstance(resolved, Reply) else (resolved[0], resolved[2])

    def no_body(self) -> Reply:
        """The answer to a body sent where the operation takes none."""
        return error(
            HTTPStatus.UNPROCESSABLE_ENTITY,
            "validation_error",
            "body: this operation takes no body",
            [{"field": "body", "message": "this operation takes no body"}],
            headers={"connection": "close"},
        )

    def _handle(self, request: Request) -> Reply:
        resolved = self._resolve(request)
        if isinstance(resolved, Reply):
            return resolved
        route, params, authorized = resolved
        reply = self._call(route, params, request, authorized)
        if request.method.upper() == "HEAD":
            return Reply(reply.status, b"", {**reply.headers, "content-length": str(len(reply.body))})
        return reply

    def _resolve(self, request: Request) -> Reply | tuple[Route, dict[str, str], bool]:
        method = request.method.upper()
        authorized = self._authorized(request)
        if not authorized:
            # An open route (/health) answers a plain GET or HEAD, its query and body ignored; anything
            # else, anywhere, is a 401 that says nothing about paths, methods or limits.
            if request.path in self._open and method in ("GET", "HEAD"):
                opened = self._lookup(request.path)
                if opened is not None:
                    return opened[0]["GET"], opened[1], False
            return error(
                HTTPStatus.UNAUTHORIZED,
                "unauthorized",
                "a valid 'Authorization: Bearer <token>' header is required",
                headers={"www-authenticate": "Bearer"},
            )
        found = self._lookup(request.path)
        if found is None:
            return error(HTTPStatus.NOT_FOUND, "not_found", "no such route")
        methods, params = found
        route = methods.get("GET" if method == "HEAD" else method)
        if route is not None:
            return route, params, authorized
        allow = _allow(methods)
        if method == "OPTIONS":
            return Reply(HTTPStatus.NO_CONTENT, headers={"allow": allow})
        return error(
            HTTPStatus.METHOD_NOT_ALLOWED,
            "method_not_allowed",
            f"{method[:20]} is not allowed here; allowed: {allow}",
            headers={"allow": allow},
        )

    def _call(self, route: Route, params: dict[str, str], request: Request, authorized: bool) -> Reply:
        if not authorized:  # an open route, asked without the token: no query, no body, nothing to check
            return _reply(route, route.call(Call(params, authorized=False)))
        query = _query(route, request.query)
        if isinstance(query, Reply):
            return query
        body = self._body(route, request)
        if isinstance(body, Reply):
            return body
        try:
            result = route.call(Call(params, query, body, authorized))
        except TicklockError as exc:
            return errors.from_domain(exc)
        return _reply(route, result)

    def _authorized(self, request: Request) -> bool:
        if self._token is None:
            return True
        given = request.headers.get("authorization", "").encode("utf-8", "replace")
        return hmac.compare_digest(given, self._token)

    def _lookup(self, path: str) -> tuple[dict[str, Route], dict[str, str]] | None:
        for pattern, methods in self._paths:
            match = pattern.fullmatch(path)
            if match:
                return methods, match.groupdict()
        return None

    def _body(self, route: Route, request: Request) -> Any:
        if route.body is None:
            return self.no_body() if request.body.strip() else None
        limit = self.body_limit(route)
        if len(request.body) > limit:
            return too_large(limit)
        if not route.body_required and not request.body:  # none at all; whitespace is a body, and not JSON
            return route.body.model_validate({})
        if not request.body:
            return error(
                HTTPStatus.UNPROCESSABLE_ENTITY,
                "validation_error",
                "body: is required",
                [{"field": "body", "message": "is required"}],
            )
        media = request.headers.get("content-type", "")
        kind, _, params = media.partition(";")
        charset = params.strip().lower().removeprefix("charset=").strip('"') if params.strip() else "utf-8"
        if not _JSON_TYPE.fullmatch(kind.strip().lower()) or charset != "utf-8":
            return error(
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as UTF-8 JSON with 'Content-Type: application/json' "
                f"(got {media[:100] or 'no Content-Type'!r})",
            )
        try:
            data = read_json(request.body)
        except BadJson as exc:
            return error(HTTPStatus.BAD_REQUEST, "malformed_json", str(exc), [{"field": "body", "message": str(exc)}])
        if not isinstance(data, dict):
            return error(
                HTTPStatus.UNPROCESSABLE_ENTITY,
                "validation_error",
                "body: must be a JSON object",
                [{"field": "body", "message": "must be a JSON object"}],
            )
        try:
            return route.body.model_validate(data)
        except ValidationError as exc:
            return errors.from_validation(exc, "body")


def too_large(limit: int) -> Reply:
    return error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "too_large", f"the request body is over {limit} bytes")


def _query(route: Route, query: dict[str, list[str]] | Any) -> Any:
    if route.query is None:
        if query:
            name = next(iter(query))[:100]
            return error(
                HTTPStatus.UNPROCESSABLE_ENTITY,
                "validation_error",
                f"query.{name}: is not a known parameter",
                [{"field": f"query.{name}", "message": "is not a known parameter"}],
            )
        return None
    for name, values in query.items():
        if len(values) > 1:
            return error(
                HTTPStatus.UNPROCESSABLE_ENTITY,
                "validation_error",
                f"query.{name[:100]}: is given {len(values)} times; give it once",
                [{"field": f"query.{name[:100]}", "message": "is given more than once"}],
            )
    try:
        return route.query.model_validate({name: values[0] for name, values in query.items()})
    except ValidationError as exc:
        return errors.from_validation(exc, "query")


def _reply(route: Route, result: Any) -> Reply:
    if isinstance(result, Reply):
        return result
    if isinstance(result, BaseModel):
        return Reply.json(route.status, result.model_dump_json().encode())
    if isinstance(result, list):
        return Reply.json(route.status, _json_list(result))
    return Reply.json(route.status, json.dumps(result).encode())


def _json_list(items: Iterable[BaseModel]) -> bytes:
    return b"[" + b",".join(item.model_dump_json().encode() for item in items) + b"]"


def _allow(methods: dict[str, Route]) -> str:
    names = set(methods)
    if "GET" in names:
        names.add("HEAD")
    names.add("OPTIONS")
    return ", ".join(sorted(names))


def _compile(path: str) -> re.Pattern[str]:
    # "/jobs/{job_id}" -> a named group of 1..MAX_PARAM characters other than "/"; the rest literally
    parts = re.split(r"\{(\w+)\}", path)
    return re.compile(
        "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>[^/]{{1,{MAX_PARAM}}})" for i, p in enumerate(parts))
    )
