"""``ticklock jobs create`` and ``jobs edit`` against a real ``ticklock serve``: an edit changes only the
fields its options name (the rest of the schedule kept), sends nothing when nothing differs, and an option
that does not apply to the schedule's kind is refused in one line with exit 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e.conftest import Serve, run_cli

pytestmark = pytest.mark.e2e


def _job(name: str, api: list[str]) -> dict[str, Any]:
    shown = run_cli("jobs", "show", name, "--json", *api)
    assert shown.returncode == 0, shown.stderr
    return dict(json.loads(shown.stdout))


def _refused(*args: str) -> str:
    answered = run_cli(*args)
    assert answered.returncode == 2, (answered.stdout, answered.stderr)
    assert len(answered.stderr.strip().splitlines()) == 1, answered.stderr
    return answered.stderr


def test_an_edit_changes_only_the_fields_it_names(start: Callable[..., Serve]) -> None:
    serve = start()
    api = ["--api", serve.url]
    made = run_cli("jobs", "create", "t", "--handler", "noop", "--cron", "0 0 9 * * *", "--tz", "Europe/Berlin", *api)
    assert made.returncode == 0, made.stderr
    job = _job("t", api)
    # clock-change choices the command line has no option for: an edit must keep them
    cron = {**job["schedule"], "gap": "skip", "overlap": "both"}
    assert serve.client.patch(f"/jobs/{job['id']}", json={"schedule": cron}).status_code == 200

    new_expr = run_cli("jobs", "edit", "t", "--cron", "0 30 9 * * *", *api)
    assert new_expr.returncode == 0, new_expr.stderr
    assert _job("t", api)["schedule"] == {**cron, "expr": "0 30 9 * * *", "timezone": "Europe/Berlin"}

    new_zone = run_cli("jobs", "edit", "t", "--tz", "Asia/Tokyo", *api)
    assert new_zone.returncode == 0, new_zone.stderr
    edited = _job("t", api)
    assert edited["schedule"] == {**cron, "expr": "0 30 9 * * *", "timezone": "Asia/Tokyo"}

    # an option whose value the job has already changes nothing: no PATCH, the version stays
    same = run_cli("jobs", "edit", "t", "--timeout", str(edited["timeout"]), "--tz", "Asia/Tokyo", *api)
    assert same.returncode == 0 and "unchanged" in same.stdout, same.stderr
    assert _job("t", api)["version"] == edited["version"]


def test_an_option_the_schedule_kind_has_no_use_for_is_refused(start: Callable[..., Serve]) -> None:
    serve = start()
    api = ["--api", serve.url]
    said = _refused("jobs", "create", "x", "--handler", "noop", "--every", "10", "--tz", "Europe/Berlin", *api)
    assert "--tz" in said and "--every" in said
    said = _refused(
        "jobs", "create", "o", "--handler", "noop", "--at", "2031-01-01T00:00:00Z", "--tz", "Europe/Berlin", *api
    )
    assert "--tz" in said and "--at" in said
    names = {j["name"] for j in json.loads(run_cli("jobs", "ls", "--json", *api).stdout)}
    assert not names & {"x", "o"}  # nothing made without its zone

    serve.create(name="i", handler="noop", schedule={"kind": "interval", "seconds": 30})
    before = _job("i", api)
    said = _refused("jobs", "edit", "i", "--tz", "Europe/Berlin", *api)
    assert "--tz" in said and "interval" in said
    assert "--tz" in _refused("jobs", "edit", "i", "--every", "20", "--tz", "Europe/Berlin", *api)
    assert _job("i", api)["version"] == before["version"]

    # a cron schedule in place of an interval takes --tz
    to_cron = run_cli("jobs", "edit", "i", "--cron", "@hourly", "--tz", "Europe/Berlin", *api)
    assert to_cron.returncode == 0, to_cron.stderr
    assert _job("i", api)["schedule"]["timezone"] == "Europe/Berlin"
    assert serve.terminate() == 0
