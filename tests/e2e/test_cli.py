"""The command line against a real ``ticklock serve``: ``ticklock jobs``, ``runs`` and ``fires`` as tables
and as JSON, jobs named by id or name, the API's refusals as exit code 1 with its message, and exit 3
when no API answers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

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
    # two jobs made in the same minute show two ids (an id begins with its creation time; the list shows its end)
    shown_ids = {line.split()[0] for line in listed.stdout.splitlines()[1:] if line.strip()}
    assert len(shown_ids) == 2 and job["id"][-8:] in shown_ids
    as_json = json.loads(run_cli("jobs", "ls", "--handler", "noop", "--json", *api).stdout)
    assert [j["name"] for j in as_json] == ["hourly"]
    searched = json.loads(run_cli("jobs", "ls", "--search", "NIGHTLY", "--json", *api).stdout)
    assert [j["name"] for j in searched] == ["nightly-report"]

    shown = run_cli("jobs", "show", "nightly-report", *api)
    assert shown.returncode == 0 and job["id"] in shown.stdout and "enabled" in shown.stdout

    paused = run_cli("jobs", "pause", job["id"], "--note", "vendor outage", *api)
    assert paused.returncode == 0 and "paused" in paused.stdout
    by_state = json.loads(run_cli("jobs", "ls", "--state", "paused", "--json", *api).stdout)
    assert [j["name"] for j in by_state] == ["nightly-report"]
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


def test_apply_plans_applies_once_prunes_and_exports_jobs_as_code(start: Callable[..., Serve], tmp_path: Path) -> None:
    serve = start()
    api = ["--api", serve.url]
    serve.create(name="stray", handler="noop", schedule={"kind": "interval", "seconds": 600})
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        """jobs:
  - name: report
    handler: noop
    schedule: {kind: cron, expr: "@hourly", timezone: Europe/London}
    policy: {overlap: buffer_one}
  - name: heartbeat
    handler: noop
    schedule: {kind: interval, seconds: 30}
    alerts: {no_success_for: 120}
"""
    )
    planned = run_cli("apply", "-f", str(jobs), "--plan", *api)
    assert planned.returncode == 4, planned.stderr  # changes pending
    assert "+ report: create" in planned.stdout and "+ heartbeat: create" in planned.stdout
    assert "stray" not in planned.stdout  # not without --prune
    assert run_cli("apply", "-f", str(jobs), *api).returncode == 0
    again = run_cli("apply", "-f", str(jobs), "--plan", *api)
    assert again.returncode == 0 and "no changes" in again.stdout  # applied: the second plan is empty
    assert run_cli("apply", "-f", str(jobs), *api).returncode == 0  # and a second apply changes nothing
    report = json.loads(run_cli("jobs", "show", "report", "--json", *api).stdout)
    assert report["version"] == 1 and report["policy"]["overlap"] == "buffer_one"

    jobs.write_text(jobs.read_text().replace("seconds: 30", "seconds: 45"))
    changed = run_cli("apply", "-f", str(jobs), "--plan", "--prune", *api)
    assert changed.returncode == 4
    assert "~ heartbeat:" in changed.stdout and '"seconds": 30' in changed.stdout and '"seconds": 45' in changed.stdout
    assert "- stray: delete" in changed.stdout
    assert run_cli("apply", "-f", str(jobs), "--prune", *api).returncode == 0
    names = {j["name"] for j in json.loads(run_cli("jobs", "ls", "--json", *api).stdout)}
    assert {"report", "heartbeat"} <= names and "stray" not in names

    exported = tmp_path / "live.yaml"
    assert run_cli("export", "-o", str(exported), *api).returncode == 0
    round_trip = run_cli("apply", "-f", str(exported), "--plan", "--prune", *api)
    assert round_trip.returncode == 0, round_trip.stdout  # what export writes is what is live

    bad = tmp_path / "bad.yaml"
    bad.write_text("jobs:\n  - name: x\n    handler: noop\n    schedule: {kind: cron, expr: '61 * * * * *'}\n")
    refused = run_cli("apply", "-f", str(bad), "--plan", *api)
    assert refused.returncode == 2 and "job 'x'" in refused.stderr
    assert serve.terminate() == 0


def test_jobs_create_edit_and_backfill_from_the_command_line(start: Callable[..., Serve]) -> None:
    serve = start()
    api = ["--api", serve.url]
    made = run_cli(
        "jobs", "create", "cleanup", "--handler", "noop", "--cron", "0 * * * * *", "--tz", "Europe/Paris", *api
    )
    assert made.returncode == 0 and "created" in made.stdout, made.stderr
    bad = run_cli("jobs", "create", "broken", "--handler", "noop", "--cron", "61 * * * * *", *api)
    assert bad.returncode == 1 and "schedule.cron.expr" in bad.stderr  # the API's message, naming the field
    assert bad.stderr.count("out of range") == 1  # said once
    edited = run_cli("jobs", "edit", "cleanup", "--timeout", "5", "--policy", '{"overlap": "buffer_one"}', *api)
    assert edited.returncode == 0, edited.stderr
    job = json.loads(run_cli("jobs", "show", "cleanup", "--json", *api).stdout)
    assert job["timeout"] == 5.0 and job["policy"]["overlap"] == "buffer_one"
    assert job["schedule"]["timezone"] == "Europe/Paris"
    dry = run_cli(
        "jobs",
        "backfill",
        "cleanup",
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-01T00:04:30Z",
        "--dry-run",
        "--json",
        *api,
    )
    assert dry.returncode == 0, dry.stderr
    answer = json.loads(dry.stdout)
    assert answer["dry_run"] is True and answer["count"] == 5  # 00:00 to 00:04, whole minutes
    nothing = run_cli("jobs", "edit", "cleanup", *api)
    assert nothing.returncode == 2 and "nothing to change" in nothing.stderr
    assert serve.terminate() == 0
