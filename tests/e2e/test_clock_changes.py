"""`ticklock serve` across a real clock change, under libfaketime (issue 10, finding 1 end to end).

The process starts five seconds before a fire at 01:55 BST on 2026-10-25, the last minute of the first
pass of the repeated 01:00 hour. Before the fix the advance raised ("found no valid fire time"), the
worker crashed, the fire's handler was started again on every resume and the job stayed in the past.
Only the wall clock is faked (FAKETIME_DONT_FAKE_MONOTONIC): timeouts and sleeps run in real time.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import REPO, TICKLOCK, free_port, wait_for

pytestmark = pytest.mark.e2e


def faketime() -> str:
    found = shutil.which("faketime")
    assert found, "faketime is installed by scripts/services.sh (Debian's faketime package)"
    return found


@pytest.mark.timeout(120)
def test_a_fire_before_the_fall_back_runs_once_and_the_job_moves_to_the_next_day(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    calls = tmp_path / "calls"
    env = {**os.environ, "PYTHONPATH": str(REPO), "TICKLOCK_DB": str(tmp_path / "t.db"), "TICKLOCK_PORT": str(port),
           "TICKLOCK_HANDLER_MODULES": "tests.support.handlers", "TICKLOCK_LOG_FORMAT": "text",
           "FAKETIME_DONT_FAKE_MONOTONIC": "1"}  # fmt: skip
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        # a session of its own: faketime runs ticklock as its child, and killing faketime alone left that
        # child serving (and taking CPU) for the rest of the suite
        proc = subprocess.Popen(
            [faketime(), "-f", "@2026-10-25 00:54:52", *TICKLOCK, "serve"],
            env=env, stdout=out, stderr=out, start_new_session=True,
        )  # fmt: skip
    try:

        def up() -> bool:
            try:
                return httpx.get(f"{url}/health", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, timeout=30)
        job = httpx.post(
            f"{url}/jobs",
            json={"name": "fall-back", "handler": "test.flaky", "payload": {"succeed_on": 1, "path": str(calls)},
                  "schedule": {"kind": "cron", "expr": "0 */5 1 * * *", "timezone": "Europe/London"}},
        ).json()  # fmt: skip
        assert job["next_run_at"] == "2026-10-25T00:55:00Z", job

        def finished() -> list[Any]:
            rows = httpx.get(f"{url}/jobs/{job['id']}/executions").json()["items"]
            return [r for r in rows if r["finished_at"]]

        wait_for(finished, timeout=40)
        time.sleep(3)  # room for a crash, a resume or a duplicate to show
        rows = httpx.get(f"{url}/jobs/{job['id']}/executions").json()["items"]
        assert [(r["status"], r["resumes"], r["scheduled_at"]) for r in rows] == [
            ("success", 0, "2026-10-25T00:55:00Z")
        ], rows
        assert len(calls.read_text().splitlines()) == 1  # the handler started once
        after = httpx.get(f"{url}/jobs/{job['id']}").json()
        assert (after["enabled"], after["next_run_at"], after["disabled_reason"]) == (
            True,
            "2026-10-26T01:00:00Z",
            None,
        )
        assert "Traceback" not in log.read_text(errors="replace")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
