"""Start `ticklock serve` as a real subprocess on a temporary database, and talk to it over HTTP."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
TICKLOCK = [sys.executable, "-m", "ticklock"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    """One `ticklock serve` process."""

    def __init__(self, db: Path, log: Path, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log
        environ = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "TICKLOCK_DB": str(db),
            "TICKLOCK_PORT": str(self.port),
            "TICKLOCK_HANDLER_MODULES": "tests.support.handlers",
            "TICKLOCK_LOG_LEVEL": "info",
            **env,
        }
        self._log = log.open("ab")
        self.proc = subprocess.Popen(
            [*TICKLOCK, "serve"], env=environ, stdout=self._log, stderr=self._log, cwd=db.parent
        )
        token = env.get("TICKLOCK_API_TOKEN")
        self.client = httpx.Client(
            base_url=self.url, timeout=10, headers={"Authorization": f"Bearer {token}"} if token else {}
        )
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        for _ in range(300):
            if self.proc.poll() is not None:
                raise AssertionError(f"ticklock serve exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if self.client.get("/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"ticklock serve did not become healthy:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def create(self, **job: Any) -> dict[str, Any]:
        response = self.client.post("/jobs", json=job)
        assert response.status_code == 201, response.text
        return dict(response.json())

    def executions(self, job_id: str, limit: int = 500) -> list[dict[str, Any]]:
        response = self.client.get(f"/jobs/{job_id}/executions", params={"limit": limit})
        assert response.status_code == 200, response.text
        return list(response.json()["items"])

    def terminate(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.close()

    def close(self) -> None:
        self.client.close()
        self._log.close()


def wait_for(check: Callable[[], Any], *, timeout: float = 30, every: float = 0.1) -> Any:
    """Poll ``check`` until it returns something truthy; fail with its last value after ``timeout``."""
    ends = time.monotonic() + timeout
    value = None
    while time.monotonic() < ends:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"condition not met in {timeout}s; last value: {value!r}")


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Serve]]:
    started: list[Serve] = []

    def run(db: Path | None = None, **env: str) -> Serve:
        serve = Serve(db or tmp_path / "ticklock.db", tmp_path / f"serve-{len(started)}.log", **env)
        started.append(serve)
        return serve

    yield run
    for serve in started:
        serve.kill()


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([*TICKLOCK, *args], env=environ, capture_output=True, text=True, timeout=60, cwd=cwd)


# the browser's fixtures, for the dashboard's tests (imported last: browser.py names Serve)
from tests.e2e.browser import browser, playwright, tab  # noqa: E402, F401
