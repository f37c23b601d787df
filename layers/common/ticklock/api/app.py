"""Resolvers wired with the routes, error mapping, auth and OpenAPI; plus the local ASGI guard."""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from aws_lambda_powertools.event_handler import HttpResolver, Response
from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer

from ticklock import __version__
from ticklock.api import errors
from ticklock.api.routes import ApiDeps, build_router

OPEN_PATHS = frozenset({"/health"})
Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def configure(app: ApiGatewayResolver, deps: ApiDeps, *, api_token: str | None) -> ApiGatewayResolver:
    """Include the routes in ``app`` with ticklock's error mapping, auth and OpenAPI document."""
    errors.install(app)
    app.use([_bearer(api_token)] if api_token else [])
    app.include_router(build_router(deps))
    security: dict[str, Any] | None = {"bearer": HTTPBearer()} if api_token else None
    app.enable_swagger(
        path="/swagger",
        title="ticklock",
        version=__version__,
        description="Jobs, schedules and execution history.",
        security_schemes=security,
        security=[{"bearer": []}] if api_token else None,
    )

    @app.get("/openapi.json", include_in_schema=False)
    def openapi() -> Response[str]:
        return Response(
            200,
            "application/json",
            app.get_openapi_json_schema(
                title="ticklock",
                version=__version__,
                security_schemes=security,
                security=[{"bearer": []}] if api_token else None,
            ),
        )

    return app


def local_app(deps: ApiDeps, *, api_token: str | None, max_body_bytes: int) -> ASGIApp:
    """The ASGI app ``ticklock serve`` runs under uvicorn."""
    resolver = configure(HttpResolver(enable_validation=True), deps, api_token=api_token)
    return _limit_body(resolver, max_body_bytes)  # type: ignore[arg-type]  # HttpResolver is ASGI


def _bearer(token: str) -> Callable[[ApiGatewayResolver, NextMiddleware], Response[Any]]:
    expected = f"Bearer {token}".encode()

    def middleware(app: ApiGatewayResolver, next_middleware: NextMiddleware) -> Response[Any]:
        if app.current_event.path in OPEN_PATHS:
            return next_middleware(app)
        given = (
            (app.current_event.headers or {}).get("authorization")
            or (app.current_event.headers or {}).get("Authorization")
            or ""
        )
        if not hmac.compare_digest(given.encode(), expected):
            raise errors.Unauthorized("a valid 'Authorization: Bearer <token>' header is required")
        return next_middleware(app)

    return middleware


def _limit_body(app: ASGIApp, limit: int) -> ASGIApp:
    """Refuse bodies over ``limit`` bytes with 413 before they are buffered (powertools reads all)."""

    async def guarded(
        scope: Scope, receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]
    ) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await _too_large(send, limit)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _too_large(send, limit)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, replay, send)

    return guarded


async def _too_large(send: Callable[[Any], Awaitable[None]], limit: int) -> None:
    body = json.dumps(
        {"error": "too_large", "message": f"the request body is over {limit} bytes", "details": []}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
