"""The built-in handlers against a real HTTP server on loopback, and the pool under a runaway handler."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.integration.conftest import Harness
from tests.support.pools import one_at_a_time
from ticklock.domain.executions import ExecutionStatus
from ticklock.engine.pool import WorkerPool

Web = tuple[str, list[tuple[str, str, str | None]]]


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self._answer()

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, body: bool = True) -> None:
        self.server.seen.append((self.command, self.path, self.headers.get("X-Probe")))  # type: ignore[attr-defined]
        if self.path.startswith("/slow"):
            time.sleep(2)
        status = int(self.path.rsplit("/", 1)[-1]) if self.path.startswith("/status/") else 200
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        if body:
            self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def web() -> Iterator[Web]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", server.seen  # type: ignore[attr-defined]
    server.shutdown()
    server.server_close()


def run_check(real: Harness, payload: dict[str, object], timeout: float = 5) -> tuple[ExecutionStatus, str | None]:
    real.add("http.check", payload=payload, timeout=timeout)
    outcome = real.runner().run(real.claim_one())
    assert outcome.execution is not None
    stored = real.store.get_execution(outcome.execution.id)
    return stored.status, stored.error


def test_http_check_succeeds_on_the_expected_status(real: Harness, web: Web) -> None:
    url, seen = web
    assert run_check(real, {"url": f"{url}/status/204", "expect_status": [200, 204], "headers": {"X-Probe": "1"}}) == (
        ExecutionStatus.SUCCESS,
        None,
    )
    assert seen == [("GET", "/status/204", "1")]


def test_http_check_head_and_unexpected_status(real: Harness, web: Web) -> None:
    url, seen = web
    status, error = run_check(real, {"url": f"{url}/status/503", "method": "HEAD"})
    assert status is ExecutionStatus.FAILED
    assert error is not None
    assert "answered 503, expected [200]" in error
    assert seen[0][0] == "HEAD"


def test_http_check_times_out_at_the_job_deadline(real: Harness, web: Web) -> None:
    url, _ = web
    status, _ = run_check(real, {"url": f"{url}/slow"}, timeout=0.5)
    assert status is ExecutionStatus.TIMEOUT


def test_http_check_rejects_a_bad_payload(real: Harness) -> None:
    status, error = run_check(real, {"url": "ftp://nowhere"})
    assert status is ExecutionStatus.FAILED
    assert error is not None
    assert "payload.url" in error


def test_a_runaway_sync_handler_does_not_wedge_a_one_worker_pool(real: Harness) -> None:
    runaway = real.add("test.sleep", payload={"seconds": 5}, timeout=0.3)
    polite = real.add("noop")
    runner = real.runner()
    pool = WorkerPool(one_at_a_time(runner.run), workers=1, queue_size=2)
    for fire in real.claim(at_least=2):
        pool.submit(fire)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(
        real.store.list_executions(j.id) and real.store.list_executions(j.id)[0].status is not ExecutionStatus.RUNNING
        for j in (runaway, polite)
    ):
        time.sleep(0.05)
    assert real.store.list_executions(runaway.id)[0].status is ExecutionStatus.TIMEOUT
    assert real.store.list_executions(polite.id)[0].status is ExecutionStatus.SUCCESS
    assert real.invoker.abandoned == 1  # the runaway thread is still sleeping, and the worker moved on
    assert pool.stop(5)
