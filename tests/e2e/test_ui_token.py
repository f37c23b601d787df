"""``ticklock ui --api URL --token T`` against a real ``ticklock serve`` that asks for a token: a token the
API refuses stops it at the start with the reason (it would have put that token on every call, and the
dashboard's login would have refused every token typed into it); the right one serves the API's answers."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import REPO, TICKLOCK, Serve, free_port, run_cli

pytestmark = [pytest.mark.e2e]


def test_a_wrong_token_stops_ticklock_ui_at_the_start(start: Callable[..., Serve]) -> None:
    serve = start(TICKLOCK_API_TOKEN="the-right-token")
    refused = run_cli("ui", "--api", serve.url, "--token", "a-wrong-token", "--port", "0")
    assert refused.returncode == 2, refused
    assert refused.stderr.strip() == (
        f"ticklock: error: {serve.url} refused the bearer token (401): check --token or TICKLOCK_API_TOKEN"
    )
    from_env = run_cli("ui", "--api", serve.url, "--port", "0", env={"TICKLOCK_API_TOKEN": "also-wrong"})
    assert from_env.returncode == 2 and "refused the bearer token" in from_env.stderr


def test_the_right_token_serves_the_apis_answers(start: Callable[..., Serve], tmp_path: Path) -> None:
    serve = start(TICKLOCK_API_TOKEN="the-right-token")
    serve.create(name="seen-through-ui", handler="test.record", schedule={"kind": "interval", "seconds": 60})
    port = free_port()
    err = tmp_path / "ui.err"
    with err.open("wb") as errors:
        ui = subprocess.Popen(
            [*TICKLOCK, "ui", "--api", serve.url, "--token", "the-right-token", "--port", str(port)],
            env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, stderr=errors,
        )  # fmt: skip
    try:
        assert ui.stdout is not None
        with ui.stdout:  # it prints one line, when it listens
            line = ui.stdout.readline().decode()
        assert line.startswith("ticklock ui: ") and "with the bearer token" in line, err.read_text()
        names = [j["name"] for j in httpx.get(f"http://127.0.0.1:{port}/jobs", timeout=10).json()["items"]]
        assert names == ["seen-through-ui"]
    finally:
        ui.kill()
        ui.wait(10)
