"""A job's state at the command line is the API's: ``jobs ls --state held`` lists a job paused until an
instant, and ``jobs ls`` and ``jobs show`` say ``held`` for it, against a real ``ticklock serve``."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from tests.e2e.conftest import Serve, run_cli

pytestmark = pytest.mark.e2e


def test_a_held_job_is_listed_and_shown_as_held(start: Callable[..., Serve]) -> None:
    serve = start()
    api = ["--api", serve.url]
    serve.create(name="held-one", handler="noop", schedule={"kind": "cron", "expr": "0 * * * * *"})
    serve.create(name="running-one", handler="noop", schedule={"kind": "cron", "expr": "0 * * * * *"})
    until = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
    paused = run_cli("jobs", "pause", "held-one", "--until", until, *api)
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.startswith("held-one: held,") and "enabled" not in paused.stdout

    held = run_cli("jobs", "ls", "--state", "held", "--json", *api)
    assert held.returncode == 0, held.stderr
    assert [j["name"] for j in json.loads(held.stdout)] == ["held-one"]
    rows = {line.split()[1]: line.split()[-1] for line in run_cli("jobs", "ls", *api).stdout.splitlines()[1:]}
    assert rows == {"held-one": "held", "running-one": "enabled"}
    shown = run_cli("jobs", "show", "held-one", *api).stdout
    assert "\nstate      held\n" in shown, shown
    for choice in ("done", "disabled"):  # accepted, and nothing is in them here
        listed = run_cli("jobs", "ls", "--state", choice, "--json", *api)
        assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stderr
    assert serve.terminate() == 0


def test_jobs_show_lists_the_fires_to_come_as_the_engine_runs_them(start: Callable[..., Serve]) -> None:
    serve = start()
    api = ["--api", serve.url]
    job = serve.create(name="quiet", handler="noop", schedule={"kind": "cron", "expr": "0 * * * * *"})
    assert run_cli("jobs", "pause", "quiet", *api).returncode == 0
    shown = run_cli("jobs", "show", "quiet", *api).stdout
    assert "\nnext fire  -\n" in shown, shown  # a paused job fires at no time, whatever next_run_at says
    assert shown.count("paused") >= 5 and " runs" not in shown, shown
    listed = run_cli("jobs", "ls", *api).stdout.splitlines()[1]
    assert listed.split()[-2:] == ["-", "paused"], listed

    assert run_cli("jobs", "resume", "quiet", *api).returncode == 0
    assert run_cli("jobs", "skip", "quiet", "2", *api).returncode == 0
    resumes_at = serve.client.get(f"/jobs/{job['id']}").json()["hold"]["resumes_at"]
    shown = run_cli("jobs", "show", "quiet", *api).stdout
    to_come = [line.split()[-1] for line in shown.splitlines() if line.startswith("to come")]
    assert to_come == ["skipped", "skipped", "runs", "runs", "runs"], shown
    assert f"next fire  {resumes_at.replace('T', ' ').replace('+00:00', 'Z')}" in shown, shown
    assert serve.terminate() == 0
