"""The ASGI front of ``ticklock serve``: bytes in, ``Api.handle`` on a thread, bytes out.

The event loop only moves bytes and counts. The token and the route are checked before anything is
read (a 401 / 404 / 405 costs no body); a body is read only for an operation that takes one, whole,
within the size limit and the body timeout. Then the request is answered on a thread: requests that
wait on the store on the store's own pool, ``/health`` on two threads of its own (its store ping is
awaited on the loop first, so a hung store holds none of them), the rest (``/handlers``, the
document) on two more, so a slow or locked store never delays them. Past ``max_in_flight`` requests a
new one gets a 503 with ``Retry-After`` at once instead of a place in a queue; ``/health`` is never
refused that way.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Any

from ticklock.api import errors
from ticklock.api.app import Api, too_large
from ticklock.api.http import Reply, Request, error
from ticklock.api.routes import ApiDeps, Route

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
MAX_QUERY_FIELDS = 32
LIGHT_THREADS = 2
LARGE_IN_FLIGHT = 4  # requests in flight on a route that takes large bodies (POST /jobs:batch), at most

log = logging.getLogger("ticklock.api")


class AsgiFront:
    """An ASGI 3 application over an ``Api``."""

    def __init__(self, api: Api, *, threads: int, max_in_flight: int, body_timeout: float) -> None:
        self.api = api
        self.max_in_flight = max_in_flight
        self.body_timeout = body_timeout
        self.in_flight = 0
        self.large_in_flight = 0
        self._store_pool = ThreadPoolExecutor(threads, thread_name_prefix="ticklock-api")
        self._light_pool = ThreadPoolExecutor(LIGHT_THREADS, thread_name_prefix="ticklock-api-light")
        # /health's own threads: its ping is awaited on the loop first, and /handlers never queues behind it
        self._open_pool = ThreadPoolExecutor(LIGHT_THREADS, thread_name_prefix="ticklock-api-health")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # no websockets (and uvicorn runs with lifespan off): the connection is closed
        headers = _headers(scope)
        bare = Request(scope["method"], scope["path"], headers)
        gated = self.api.gate(bare)
        if isinstance(gated, Reply):
            await _send(send, _closing(gated, headers))  # 401 / 404 / 405 before a byte of the body is read
            return
        route, authorized = gated
        counted = not route.open
        if counted and self.in_flight >= self.max_in_flight:
            await _send(send, _closing(errors.overloaded(self.max_in_flight), headers))
            return
        # a route taking large bodies (a batch: megabytes each, buffered whole) has a bound of its own
        large = route.max_body is not None
        if large and self.large_in_flight >= LARGE_IN_FLIGHT:
            await _send(send, _closing(errors.overloaded(LARGE_IN_FLIGHT), headers))
            return
        self.in_flight += counted
        self.large_in_flight += large
        try:
            reply = await self._answer(scope, receive, bare, route, authorized)
            if reply is not None:
                await _send(send, reply)
        finally:
            self.in_flight -= counted
            self.large_in_flight -= large

    async def _answer(
        self, scope: Scope, receive: Receive, bare: Request, route: Route, authorized: bool
    ) -> Reply | None:
        loop = asyncio.get_running_loop()
        if route.open:
            await self.api.probe.settle()  # a hung store holds no thread here, however many ask
        if not authorized:  # an open route without the token: query and body are neither read nor judged
            return _closing(await loop.run_in_executor(self._open_pool, self.api.handle, bare), bare.headers)
        query = _query(scope.get("query_string", b""))
        if isinstance(query, Reply):
            return _closing(query, bare.headers)
        if route.body is None:
            if _declares_body(bare.headers):
                return self.api.no_body()  # refused unread: a body-less route never waits for bytes
            body = b""
        else:
            read = await self._body(receive, bare.headers, self.api.body_limit(route))
            if read is None or isinstance(read, Reply):
                return read
            body = read
        request = Request(bare.method, bare.path, bare.headers, query, body)
        pool = self._store_pool if route.store else self._open_pool if route.open else self._light_pool
        return await loop.run_in_executor(pool, self.api.handle, request)

    async def _body(self, receive: Receive, headers: Mapping[str, str], limit: int) -> bytes | Reply | None:
        """The whole body (at most ``limit`` bytes), a 413 / 408, or None if the client went away."""
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or len(declared) > 12):
            return error(
                HTTPStatus.BAD_REQUEST, "bad_request", "Content-Length is not a number", headers={"connection": "close"}
            )
        if declared is not None and int(declared) > limit:
            return _closing(too_large(limit), headers)
        if not _declares_body(headers):
            return b""
        chunks: list[bytes] = []
        size = 0
        try:
            # one timer for the whole body (wait_for per message would make a task of every receive)
            async with asyncio.timeout(self.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return None
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        return _closing(too_large(limit), headers)
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            return error(
                HTTPStatus.REQUEST_TIMEOUT,
                "body_timeout",
                f"the body did not arrive within {self.body_timeout:g} s",
                headers={"connection": "close"},
            )

    def close(self) -> None:
        self.api.close()
        self._store_pool.shutdown(wait=False, cancel_futures=True)
        self._light_pool.shutdown(wait=False, cancel_futures=True)
        self._open_pool.shutdown(wait=False, cancel_futures=True)


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


def _declares_body(headers: Mapping[str, str]) -> bool:
    return headers.get("content-length", "0") != "0" or "transfer-encoding" in headers


def _closing(reply: Reply, headers: Mapping[str, str]) -> Reply:
    """``reply``, closing the connection when the request's body was left unread."""
    if not _declares_body(headers) or "connection" in reply.headers:
        return reply
    return Reply(reply.status, reply.body, {**reply.headers, "connection": "close"})


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
