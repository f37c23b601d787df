"""The ASGI front of ``ticklock serve``: bytes in, ``Api.handle`` on a thread, bytes out.

The event loop only moves bytes and counts. Each request is read whole (within the size limit and the
body timeout), then answered on a thread: requests that wait on the store on the store's own pool,
the rest (``/health``, ``/handlers``, the document) on a small pool of their own, so a slow or locked
store never delays them. Past ``max_in_flight`` requests a new one gets a 503 with ``Retry-After`` at
once instead of a place in a queue; ``/health`` is never refused that way.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Any

from ticklock.api import errors
from ticklock.api.app import Api, too_large
from ticklock.api.http import Reply, Request, error
from ticklock.api.routes import ApiDeps

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
MAX_QUERY_FIELDS = 32
LIGHT_THREADS = 2

log = logging.getLogger("ticklock.api")


class AsgiFront:
    """An ASGI 3 application over an ``Api``."""

    def __init__(self, api: Api, *, threads: int, max_in_flight: int, body_timeout: float) -> None:
        self.api = api
        self.max_in_flight = max_in_flight
        self.body_timeout = body_timeout
        self.in_flight = 0
        self._store_pool = ThreadPoolExecutor(threads, thread_name_prefix="ticklock-api")
        self._light_pool = ThreadPoolExecutor(LIGHT_THREADS, thread_name_prefix="ticklock-api-light")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # no websockets: uvicorn closes the connection
        method = scope["method"]
        route = self.api.route_for(method, scope["path"])
        counted = route is None or not route.open
        if counted and self.in_flight >= self.max_in_flight:
            await _send(send, errors.overloaded(self.max_in_flight))
            return
        self.in_flight += counted
        try:
            reply = await self._answer(scope, receive, route)
            if reply is not None:
                await _send(send, reply)
        finally:
            self.in_flight -= counted

    async def _answer(self, scope: Scope, receive: Receive, route: Any) -> Reply | None:
        headers = _headers(scope)
        query = _query(scope.get("query_string", b""))
        if isinstance(query, Reply):
            return query
        bare = Request(scope["method"], scope["path"], headers, query)
        early = self.api.gate(bare)
        if early is not None:
            return early  # 401 / 404 / 405 without reading a byte of the body
        body = await self._body(receive, headers, expects=route is not None and route.body is not None)
        if body is None or isinstance(body, Reply):
            return body
        request = Request(bare.method, bare.path, headers, query, body)
        pool = self._store_pool if route is None or route.store else self._light_pool
        return await asyncio.get_running_loop().run_in_executor(pool, self.api.handle, request)

    async def _body(self, receive: Receive, headers: dict[str, str], *, expects: bool) -> bytes | Reply | None:
        """The whole body, a 413 / 408, or None if the client went away."""
        limit = self.api.max_body_bytes
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or len(declared) > 12):
            return error(HTTPStatus.BAD_REQUEST, "bad_request", "Content-Length is not a number")
        if declared is not None and int(declared) > limit:
            return too_large(limit)
        if declared == "0" and "transfer-encoding" not in headers:
            return b""
        chunks: list[bytes] = []
        size = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.body_timeout
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                return error(
                    HTTPStatus.REQUEST_TIMEOUT,
                    "body_timeout",
                    f"the body did not arrive within {self.body_timeout:g} s",
                    headers={"connection": "close"},
                )
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return too_large(limit)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def close(self) -> None:
        self.api.close()
        self._store_pool.shutdown(wait=False, cancel_futures=True)
        self._light_pool.shutdown(wait=False, cancel_futures=True)


def local_app(
    deps: ApiDeps,
    *,
    api_token: str | None,
    max_body_bytes: int,
    threads: int = 8,
    max_in_flight: int = 512,
    body_timeout: float = 30.0,
) -> AsgiFront:
    """The ASGI app ``ticklock serve`` runs under uvicorn."""
    api = Api(deps, api_token=api_token, max_body_bytes=max_body_bytes)
    return AsgiFront(api, threads=threads, max_in_flight=max_in_flight, body_timeout=body_timeout)


def _headers(scope: Scope) -> dict[str, str]:
    # latin-1 maps every byte to one character, so no header value can fail to decode; a repeated
    # header is joined the way RFC 9110 folds them
    out: dict[str, str] = {}
    for name, value in scope.get("headers") or ():
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        out[key] = f"{out[key]}, {text}" if key in out else text
    return out


def _query(raw: bytes) -> dict[str, list[str]] | Reply:
    if not raw:
        return {}
    try:
        return urllib.parse.parse_qs(
            raw.decode("ascii"), keep_blank_values=True, errors="strict", max_num_fields=MAX_QUERY_FIELDS
        )
    except (UnicodeDecodeError, ValueError) as exc:
        reason = "has too many fields" if "Max number" in str(exc) else "is not percent-encoded UTF-8"
        return error(HTTPStatus.BAD_REQUEST, "bad_query", f"the query string {reason}")


async def _send(send: Send, reply: Reply) -> None:
    headers = [(k.encode("latin-1", "replace"), v.encode("latin-1", "replace")) for k, v in reply.headers.items()]
    if "content-length" not in reply.headers and reply.status not in (204, 304):
        headers.append((b"content-length", str(len(reply.body)).encode()))
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
