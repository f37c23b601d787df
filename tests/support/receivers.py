"""A webhook server and an SMTP server (aiosmtpd) on loopback, started by the tests that need to see
what ticklock sends: they keep every call and every message."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller

from tests.support.servers import free_port


@dataclass
class Receivers:
    """The webhook server's calls (``url``) and the SMTP server's messages (on ``port``)."""

    url: str
    port: int
    posts: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    mails: list[Any] = field(default_factory=list)

    def documents(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _, body in self.posts]

    def wait(self, posts: int, mails: int, timeout: float = 15.0) -> None:
        """Wait until exactly this many calls and messages have come (and no more do)."""
        deadline = time.monotonic() + timeout
        while (len(self.posts) < posts or len(self.mails) < mails) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # and nothing more arrives
        assert (len(self.posts), len(self.mails)) == (posts, mails)


@contextmanager
def receivers() -> Iterator[Receivers]:
    port = free_port()
    box = Receivers(url="", port=port)

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            box.posts.append(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(204)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    class Mailbox:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            box.mails.append(message_from_bytes(envelope.content, policy=policy.default))
            return "250 OK"

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    box.url = f"http://127.0.0.1:{server.server_address[1]}/alerts"
    smtp = Controller(Mailbox(), hostname="127.0.0.1", port=port)
    smtp.start()
    try:
        yield box
    finally:
        smtp.stop()
        server.shutdown()
        server.server_close()
