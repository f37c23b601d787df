"""uvicorn as ``ticklock serve`` runs it, with the limits a server on an open port needs.

- **Header timeout.** uvicorn arms no timer until a first response is sent, so a client that sends half
  a request line holds its connection for ever. Each connection here must finish a request's line and
  headers within ``api_header_timeout`` seconds of connecting (or of its previous response).
- **Connection limit.** Past ``api_max_connections`` open connections, the oldest one still waiting
  for a request's headers is closed to make room (a new one is refused only when all are mid-request).
  The limit is kept below the process's file-descriptor limit (raised to its hard limit at start), so
  the accept loop never runs out of descriptors and the store keeps its own.
- **Keep-alive.** Idle connections close after ``api_keepalive_timeout`` seconds (uvicorn's own timer).
- **Quiet under abuse.** Log lines that a flood repeats (malformed requests, accept errors) are let
  through once a minute per message, with a count of the ones held back.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import time
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger("ticklock.api")
FD_RESERVE = 256  # descriptors kept for the store, the lock, log files and the handlers' own sockets


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

    # Connections waiting for a request's headers (new, or idle between keep-alive requests), oldest
    # first: the ones to give up when the limit is reached, so that a flood of half-sent requests
    # cannot keep a real client (or /health) out.
    waiting: dict[GuardedProtocol, None] = {}

    class GuardedProtocol(HttpToolsProtocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                oldest = next(iter(waiting), None)
                if oldest is None:  # every connection is busy with a request: this one waits its turn
                    transport.abort()
                    return
                oldest._disarm()
                oldest.transport.abort()
            self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(header_timeout, self._headers_late)
            waiting[self] = None

        def _disarm(self) -> None:
            waiting.pop(self, None)
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def send_400_response(self, msg: str) -> None:
            # httptools refused the bytes (a bad request line, a header or URL over its limits): the usual
            # error body, and the connection closed, since the rest of the stream cannot be trusted
            body = json.dumps(
                {"error": "bad_request", "message": f"not a valid HTTP/1.1 request: {msg}", "details": []}
            )
            head = f"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            self.transport.write(f"{head}connection: close\r\n\r\n{body}".encode())
            self.transport.close()

        def _headers_late(self) -> None:
            self._header_timer = None
            waiting.pop(self, None)
            if self.cycle is None or self.cycle.response_complete:
                self.transport.close()

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
    """Install the once-a-minute filter on the loggers a flood of bad clients fills."""
    flood = OncePerMinute()
    for name in ("uvicorn.error", "asyncio"):
        logging.getLogger(name).addFilter(flood)


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
        backlog=1024,
    )
