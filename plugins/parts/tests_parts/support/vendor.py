"""A spot-price vendor on loopback, for the catalogue walk's tests: it counts requests and can be told to
answer 429 (with a Retry-After), 500, or slowly."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from tests.support.servers import free_port


class VendorServer:
    def __init__(self, key: str = "test-key") -> None:
        self.key = key
        self.requests: list[list[str]] = []  # the mpns of each request, in order
        self.mode = "ok"  # ok, 429, 500, slow
        self.retry_after = "1"
        self.throttle_next = 0  # answer 429 to this many requests, then go back to ok
        self.delay = 0.0
        self.mutex = threading.Lock()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        vendor = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                vendor.answer(self)

            def log_message(self, format: str, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @staticmethod
    def price(mpn: str) -> float:
        return round(1 + sum(map(ord, mpn)) % 100 / 10, 2)

    def answer(self, request: BaseHTTPRequestHandler) -> None:
        url = urlsplit(request.path)
        mpns = [m for m in parse_qs(url.query).get("mpn", [""])[0].split(",") if m]
        with self.mutex:
            self.requests.append(mpns)
            mode = self.mode
            if self.throttle_next > 0:
                self.throttle_next -= 1
                mode = "429"
        if url.path != "/spot-prices" or request.headers.get("X-Api-Key") != self.key:
            self.send(request, 401, {"error": "bad key or path"})
        elif mode == "429":
            self.send(request, 429, {"error": "slow down"}, {"Retry-After": self.retry_after})
        elif mode == "500":
            self.send(request, 500, {"error": "internal"})
        else:
            if mode == "slow":
                time.sleep(self.delay)
            prices = [{"mpn": m, "price": self.price(m), "currency": "USD"} for m in mpns if not m.endswith("-X")]
            self.send(request, 200, {"prices": prices})

    @staticmethod
    def send(request: BaseHTTPRequestHandler, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        try:
            request.send_response(status)
            for name, value in (headers or {}).items():
                request.send_header(name, value)
            request.send_header("Content-Type", "application/json")
            request.send_header("Content-Length", str(len(data)))
            request.end_headers()
            request.wfile.write(data)
        except OSError:
            pass  # the client gave up (the slow mode)


@contextmanager
def vendor_server() -> Iterator[VendorServer]:
    server = VendorServer()
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()
