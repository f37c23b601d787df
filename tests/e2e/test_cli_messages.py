"""What the command line says, against a real ``ticklock serve`` (and a real web server that is not
ticklock): ``apply`` says what it did, ``fires --since`` too long a span names --since once, ``--api
HOST:PORT`` works, another server at ``--api`` is one line with its status, a 401 names ``--token``,
and ``jobs trigger`` says it triggered."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import Serve, run_cli
from tests.support.servers import Server, free_port

pytestmark = pytest.mark.e2e
TOKEN = "messages-token"


def _one_line(text: str) -> str:
    assert len(text.strip().splitlines()) == 1, text
    return text.strip()


def test_apply_says_what_it_did(start: Callable[..., Serve], tmp_path: Path) -> None:
    serve = start()
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        "jobs:\n"
        "  - {name: a, handler: noop, schedule: {kind: interval, seconds: 60}}\n"
        "  - {name: b, handler: noop, schedule: {kind: interval, seconds: 90}}\n"
    )
    applied = run_cli("apply", "-f", str(jobs), "--api", serve.url)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.strip().splitlines()[-1] == "created 2, changed 0, deleted 0"
    assert "to create" not in applied.stdout
    assert serve.terminate() == 0


def test_fires_since_too_long_names_since_once(start: Callable[..., Serve]) -> None:
    serve = start()
    job = serve.create(name="c", handler="noop", schedule={"kind": "cron", "expr": "0 * * * * *"})
    too_long = run_cli("fires", "c", "--since", "40d", "--api", serve.url)
    assert too_long.returncode == 2
    said = _one_line(too_long.stderr)
    assert said == "ticklock: error: --since 40d: a window is at most 31 days"
    # the API names its field once too
    start_at = (datetime.now(UTC) - timedelta(days=40)).isoformat()
    answer = serve.client.get(f"/jobs/{job['id']}/fires", params={"from": start_at}).json()
    assert answer["message"] == "query.from: a window is at most 31 days"
    assert serve.terminate() == 0


def test_api_as_host_and_port_means_http(start: Callable[..., Serve]) -> None:
    serve = start()
    serve.create(name="h", handler="noop", schedule={"kind": "interval", "seconds": 60})
    listed = run_cli("jobs", "ls", "--api", f"127.0.0.1:{serve.port}")
    assert listed.returncode == 0, listed.stderr
    assert "h" in listed.stdout.split()
    other = run_cli("jobs", "ls", "--api", f"ftp://127.0.0.1:{serve.port}")
    assert other.returncode == 2 and "http://" in _one_line(other.stderr)
    assert serve.terminate() == 0


@pytest.fixture
def web_server(tmp_path: Path) -> Iterator[str]:
    """A plain web server (python -m http.server): HTML for a missing path, bytes for a file."""
    port = free_port()
    (tmp_path / "site").mkdir()

    def ready() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/").status_code == 200
        except httpx.TransportError:
            return False

    argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "-d", str(tmp_path / "site")]
    server = Server("http.server", argv, ready, tmp_path / "http.log")
    yield f"http://127.0.0.1:{port}"
    server.stop()


def test_another_server_at_the_address_is_one_line_with_its_status(web_server: str, tmp_path: Path) -> None:
    page = run_cli("jobs", "ls", "--api", web_server)  # GET /jobs: its 404 page, in HTML
    assert page.returncode == 3
    said = _one_line(page.stderr)
    assert "404" in said and "not a ticklock API" in said and web_server in said and "<" not in said
    (tmp_path / "site" / "jobs").write_text("<html><body>a file</body></html>")
    found = run_cli("jobs", "ls", "--api", web_server)  # a 200 that is not JSON
    assert found.returncode == 3
    said = _one_line(found.stderr)
    assert "200" in said and "not a ticklock API" in said and "<" not in said


def test_a_401_says_how_to_give_the_token(start: Callable[..., Serve]) -> None:
    serve = start(TICKLOCK_API_TOKEN=TOKEN)
    none = run_cli("jobs", "ls", "--api", serve.url, env={"TICKLOCK_API_TOKEN": ""})
    assert none.returncode == 1 and "401" in none.stderr
    assert "--token" in none.stderr and "TICKLOCK_API_TOKEN" in none.stderr
    wrong = run_cli("jobs", "ls", "--api", serve.url, "--token", "not-it")
    assert wrong.returncode == 1 and "--token" in wrong.stderr and "refused" in wrong.stderr
    assert serve.terminate() == 0


def test_trigger_says_it_triggered(start: Callable[..., Serve]) -> None:
    serve = start()
    serve.create(name="daily", handler="noop", schedule={"kind": "cron", "expr": "0 0 3 * * *"})
    triggered = run_cli("jobs", "trigger", "daily", "--api", serve.url)
    assert triggered.returncode == 0, triggered.stderr
    assert triggered.stdout.startswith("triggered daily: a run is due now")
    assert serve.terminate() == 0
