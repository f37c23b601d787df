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
