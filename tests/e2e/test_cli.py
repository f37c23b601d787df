"""The command line against a real ``ticklock serve``: ``ticklock jobs``, ``runs`` and ``fires`` as tables
and as JSON, jobs named by id or name, the API's refusals as exit code 1 with its message, and exit 3
when no API answers."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.e2e.conftest import Serve, run_cli, wait_for

pytestmark = pytest.mark.e2e
TOKEN = "cli-token"


def test_jobs_runs_and_fires_from_the_command_line(start: Callable[..., Serve]) -> None:
    serve = start(TICKLOCK_API_TOKEN=TOKEN)
    api = ["--api", serve.url, "--token", TOKEN]
    job = serve.create(name="nightly-report", handler="test.record", schedule={"kind": "cron", "expr": "* * * * * *"})
    serve.create(name="hourly", handler="noop", schedule={"kind": "interval", "seconds": 3600})

    listed = run_cli("jobs", "ls", *api)
    assert listed.returncode == 0, listed.stderr
    assert "nightly-report" in listed.stdout and "cron * * * * * *" in listed.stdout and "every 3600 s" in listed.stdout
    as_json = json.loads(run_cli("jobs", "ls", "--handler", "noop", "--json", *api).stdout)
    assert [j["name"] for j in as_json] == ["hourly"]

    shown = run_cli("jobs", "show", "nightly-report", *api)
    assert shown.returncode == 0 and job["id"] in shown.stdout and "enabled" in shown.stdout

    paused = run_cli("jobs", "pause", job["id"], "--note", "vendor outage", *api)
    assert paused.returncode == 0 and "paused" in paused.stdout
    held = json.loads(run_cli("jobs", "show", "nightly-report", "--json", *api).stdout)
    assert held["enabled"] is False and held["hold"]["note"] == "vendor outage"
    assert run_cli("jobs", "resume", "nightly-report", *api).returncode == 0
    assert run_cli("jobs", "trigger", "nightly-report", *api).returncode == 0

    wait_for(lambda: json.loads(run_cli("runs", "nightly-report", "--json", *api).stdout), timeout=30)
    runs = run_cli("runs", "nightly-report", *api)
    assert runs.returncode == 0 and "success" in runs.stdout
    fires = json.loads(run_cli("fires", "nightly-report", "--since", "5m", "--json", *api).stdout)
    assert any(f["status"] == "ran" for f in fires)

    skipped = run_cli("jobs", "skip", "nightly-report", "0", *api)  # the API refuses it, naming the field
    assert skipped.returncode == 1 and "count" in skipped.stderr
    missing = run_cli("jobs", "show", "no-such-job", *api)
    assert missing.returncode == 1 and "no-such-job" in missing.stderr
    denied = run_cli("jobs", "ls", "--api", serve.url)  # no token
    assert denied.returncode == 1 and "401" in denied.stderr
    bad_span = run_cli("fires", "nightly-report", "--since", "yesterday", *api)
    assert bad_span.returncode == 2 and "--since" in bad_span.stderr

    assert run_cli("jobs", "rm", "hourly", *api).returncode == 0
    names = {j["name"] for j in json.loads(run_cli("jobs", "ls", "--json", *api).stdout)}
    assert "nightly-report" in names and "hourly" not in names
    assert serve.terminate() == 0


def test_no_api_at_the_address_is_exit_3() -> None:
    answered = run_cli("jobs", "ls", "--api", "http://127.0.0.1:9")
    assert answered.returncode == 3 and "no API answered" in answered.stderr
