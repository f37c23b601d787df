"""uvicorn as ``ticklock serve`` runs it, with the limits a server on an open port needs.

- **Header timeout.** uvicorn arms no timer until a first response is sent, so a client that sends half
  a request line holds its connection for ever. Each connection here must finish a request's line and
  headers within ``api_header_timeout`` seconds of connecting, or of the first byte of its next
  keep-alive request (until then uvicorn's keep-alive timer governs an idle connection). A client that
  stops reading its answers gets the same time to start again, then its connection is aborted.
- **Pipelining bound.** A connection may have ``MAX_PIPELINED`` requests queued behind the one being
  answered; the next one aborts it. httptools parses every request of a chunk it is given (asyncio reads
  up to 256 KiB at once: thousands of bare GETs), and uvicorn queues each behind the one being answered,
  so a few clients that pipeline thousands of requests and never read would keep the loop parsing and
  answering them while anything else (``/health``) waits its turn.
- **Connection limit.** Past ``api_max_connections`` open connections, the oldest one still waiting
  for a request's headers is closed to make room (a new one is refused only when all are mid-request).
  The limit is kept ``FD_RESERVE`` below the process's file-descriptor limit (raised to its hard limit
  at start): room for one accept burst of ``BACKLOG`` sockets and for the store's own descriptors.
- **Keep-alive.** Idle connections close after ``api_keepalive_timeout`` seconds (uvicorn's own timer).
- **Quiet under abuse.** Log lines that a flood repeats (malformed requests, accept errors) are let
  through once a minute per message, with a count of the ones held back.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from http import HTTPStatus
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ticklock.api.http import error

log = logging.getLogger("ticklock.api")
BACKLOG = 128  # asyncio accepts up to this many sockets in one go, before any can be turned away
# descriptors kept free: one accept burst, plus the store, the lock, log files and the handlers' sockets
FD_RESERVE = BACKLOG + 256
MAX_PIPELINED = 32  # requests queued on one connection behind the one being answered (no browser pipelines)


class _Flooded(Exception):
    """Raised from a parser callback to stop httptools mid-chunk: the connection pipelined too much."""


def connection_limit(wanted: int) -> int:
    """Raise the soft descriptor limit as far as allowed; return how many connections fit under it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, wanted + FD_RESERVE)
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    fitted = max(16, min(wanted, soft - FD_RESERVE))
    if fitted < wanted:
        log.warning("api.connections_limited", extra={"wanted": wanted, "allowed": fitted, "fd_limit": soft})
    return fitted


def protocol(*, header_timeout: float, max_connections: int) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with the header timeout and the connection limit."""

    # Connections between requests (new, or idle on keep-alive), in the order they became so: the ones
    # given up first when the limit is reached, so a flood of half-sent requests cannot keep a real
    # client (or /health) out. A connection leaves this set while a request is being answered.
    between: dict[GuardedProtocol, None] = {}

    class GuardedProtocol(HttpToolsProtocol):
        _header_timer: asyncio.TimerHandle | None = None
        _stall_timer: asyncio.TimerHandle | None = None
        _begun = False  # a request's first bytes have been parsed, its headers not yet
        _flooded = False  # more than MAX_PIPELINED requests queued: aborted

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                oldest = next(iter(between), None)
                if oldest is None:  # every connection is busy with a request: this one waits its turn
                    transport.abort()
                    return
                oldest._leave()
                oldest.transport.abort()
            between[self] = None
            self._arm()  # a new connection owes its first request line and headers

        def data_received(self, data: bytes) -> None:
            if self in between and self._header_timer is None:
                self._arm()  # the first bytes after an idle spell (even a bare CRLF): headers are owed now
            super().data_received(data)

        def on_message_begin(self) -> None:
            if len(self.pipeline) >= MAX_PIPELINED:
                self._flooded = True
                raise _Flooded  # httptools stops here; uvicorn's data_received then calls send_400_response
            self._begun = True
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            self._begun = False
            self._leave()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.cycle is not None and not self.cycle.response_complete:
                return  # a pipelined request began: it is being answered
            between[self] = None  # between requests, closing or not: evictable again
            if self._begun and self._header_timer is None:
                self._arm()  # the next request began during this one: its headers are owed from now

        def pause_writing(self) -> None:
            # the client stopped reading its answers: it gets the header timeout to start again, and
            # meanwhile it is the first to go when the limit needs room
            super().pause_writing()
            between[self] = None
            if self._stall_timer is None:
                self._stall_timer = self.loop.call_later(header_timeout, self.transport.abort)

        def resume_writing(self) -> None:
            super().resume_writing()
            if self._stall_timer is not None:
                self._stall_timer.cancel()
                self._stall_timer = None
            if self.cycle is not None and not self.cycle.response_complete and self._header_timer is None:
                between.pop(self, None)  # answering again: not to be evicted

        def connection_lost(self, exc: Exception | None) -> None:
            self._leave()
            if self._stall_timer is not None:
                self._stall_timer.cancel()
                self._stall_timer = None
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._header_timer = self.loop.call_later(header_timeout, self._headers_late)

        def _leave(self) -> None:
            between.pop(self, None)
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def send_400_response(self, msg: str) -> None:
            if self._flooded:  # not a bad request: too many of them queued; nothing more is read or answered
                self._leave()
                self.transport.abort()
                return
            # httptools refused the bytes (a bad request line, a header or URL over its limits): the usual
            # error body, and the connection closed, since the rest of the stream cannot be trusted
            reply = error(HTTPStatus.BAD_REQUEST, "bad_request", f"not a valid HTTP/1.1 request: {msg}")
            head = f"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {len(reply.body)}"
            self.transport.write(f"{head}\r\nconnection: close\r\n\r\n".encode() + reply.body)
            self.transport.close()

        def _headers_late(self) -> None:
            self._header_timer = None
            if self.cycle is None or self.cycle.response_complete:
                self._leave()
                self.transport.abort()  # not close(): that waits for a client that may never read

    return GuardedProtocol


class OncePerMinute(logging.Filter):
    """Lets a message through once a minute; the next one that passes says how many were held back."""

    def __init__(self, every: float = 60.0) -> None:
        super().__init__()
        self.every = every
        self._seen: dict[str, tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = f"{record.name}:{record.msg}"[:200]
        now = time.monotonic()
        last, held = self._seen.get(key, (float("-inf"), 0))
        if now - last < self.every:
            self._seen[key] = (last, held + 1)
            return False
        self._seen[key] = (now, 0)
        if held:
            record.msg = f"{record.msg} ({held} more like it in the last minute were not logged)"
        if len(self._seen) > 1000:
            self._seen.clear()
        return True


def quiet_floods() -> None:
    """Install the once-a-minute filter on the loggers a flood of bad clients fills (once each)."""
    for name in ("uvicorn.error", "asyncio"):
        target = logging.getLogger(name)
        if not any(isinstance(f, OncePerMinute) for f in target.filters):
            target.addFilter(OncePerMinute())


def config(app: Any, *, host: str, port: int, settings: Any) -> uvicorn.Config:
    """The uvicorn configuration for ``app`` under ``settings``' API limits."""
    max_connections = connection_limit(settings.api_max_connections)
    quiet_floods()
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol(header_timeout=settings.api_header_timeout, max_connections=max_connections),
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_keep_alive=settings.api_keepalive_timeout,
        timeout_graceful_shutdown=5,
        backlog=BACKLOG,
    )
