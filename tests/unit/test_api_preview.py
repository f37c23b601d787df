"""The schedule previews: ``GET /jobs/{id}/upcoming`` and ``POST /schedules/preview`` (in process, on a real
SQLite store), and ``ticklock cron`` in a terminal."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from ticklock.cli import main

Harness = Any
LONDON_SPRING = {"kind": "cron", "expr": "0 30 * * * *", "timezone": "Europe/London"}


def preview(api: Harness, body: dict[str, Any]) -> Any:
    return api.post("/schedules/preview", json=body)


def test_preview_marks_the_gap_fire_and_gives_utc_and_wall_time(api: Harness) -> None:
    response = preview(api, {"schedule": LONDON_SPRING, "count": 3, "after": "2026-03-29T00:00:00Z"})
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["timezone"] == "Europe/London"
    assert data["fires"] == [
        {"at": "2026-03-29T00:30:00Z", "local": "2026-03-29T00:30:00+00:00", "change": None},
        {
            "at": "2026-03-29T01:00:00Z",
            "local": "2026-03-29T02:00:00+01:00",
            "change": {"kind": "gap", "pass": None, "scheduled": "2026-03-29T01:30:00"},
        },
        {"at": "2026-03-29T01:30:00Z", "local": "2026-03-29T02:30:00+01:00", "change": None},
    ]


def test_preview_marks_both_passes_of_an_overlap(api: Harness) -> None:
    schedule = {"kind": "cron", "expr": "0 */20 * * * *", "timezone": "Australia/Lord_Howe"}
    fires = preview(api, {"schedule": schedule, "count": 3, "after": "2026-04-04T14:30:00Z"}).json()["fires"]
    assert [(f["local"], f["change"]) for f in fires] == [
        ("2026-04-05T01:40:00+11:00", {"kind": "overlap", "pass": "first", "scheduled": None}),
        ("2026-04-05T01:40:00+10:30", {"kind": "overlap", "pass": "second", "scheduled": None}),
        ("2026-04-05T02:00:00+10:30", None),
    ]


def test_preview_applies_the_dst_choices(api: Harness) -> None:
    schedule = {**LONDON_SPRING, "gap": "skip"}
    fires = preview(api, {"schedule": schedule, "count": 2, "after": "2026-03-29T00:00:00Z"}).json()["fires"]
    assert [f["at"] for f in fires] == ["2026-03-29T00:30:00Z", "2026-03-29T01:30:00Z"]


def test_preview_defaults_to_ten_fires_from_the_service_clock(api: Harness) -> None:
    every = {"kind": "interval", "seconds": 60}
    fires = preview(api, {"schedule": every}).json()["fires"]
    assert len(fires) == 10
    start = api.clock.now()
    assert [datetime.fromisoformat(f["at"]) for f in fires[:2]] == [start + timedelta(seconds=60 * n) for n in (1, 2)]


def test_preview_of_a_once_schedule_is_its_instant(api: Harness) -> None:
    once = {"kind": "once", "at": "2030-01-01T00:00:00+01:00"}
    fires = preview(api, {"schedule": once, "after": "2026-01-01T00:00:00Z"}).json()["fires"]
    assert fires == [{"at": "2029-12-31T23:00:00Z", "local": "2029-12-31T23:00:00+00:00", "change": None}]
    assert preview(api, {"schedule": once, "after": "2031-01-01T00:00:00Z"}).json()["fires"] == []


def test_a_thousand_fires_is_the_limit(api: Harness) -> None:
    every = {"kind": "cron", "expr": "* * * * * *", "timezone": "Antarctica/Troll"}
    ok = preview(api, {"schedule": every, "count": 1000, "after": "2026-03-29T00:50:00Z"})
    assert ok.status_code == 200 and len(ok.json()["fires"]) == 1000
    too_many = preview(api, {"schedule": every, "count": 1001})
    assert too_many.status_code == 422
    assert too_many.json()["details"][0]["field"] == "count"


@pytest.mark.parametrize(
    ("body", "field", "fragment"),
    [
        ({"schedule": {"kind": "cron", "expr": "0 0 0 30 2 *"}}, "schedule.cron.expr", "never fires"),
        ({"schedule": {"kind": "cron", "expr": "0 0 0 * * L"}}, "schedule.cron.expr", "'L' alone"),
        ({"schedule": {**LONDON_SPRING, "gap": "later"}}, "schedule.cron.gap", "jump"),
        ({"schedule": {**LONDON_SPRING, "overlap": 1}}, "schedule.cron.overlap", "auto"),
        ({"schedule": LONDON_SPRING, "after": "2026-03-29"}, "after", "RFC 3339"),
        ({"schedule": LONDON_SPRING, "count": 0}, "count", "greater than or equal to 1"),
        ({"schedule": LONDON_SPRING, "extra": 1}, "extra", "is not a known field"),
    ],
)
def test_preview_refuses_what_a_job_would_refuse(api: Harness, body: dict[str, Any], field: str, fragment: str) -> None:
    response = preview(api, body)
    assert response.status_code == 422, response.text
    details = response.json()["details"]
    assert any(d["field"] == field and fragment in d["message"] for d in details), details


def test_upcoming_for_a_stored_job(api: Harness) -> None:
    job = {"name": "spring", "handler": "noop", "schedule": LONDON_SPRING}
    created = api.post("/jobs", json=job)
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    response = api.get(f"/jobs/{job_id}/upcoming?count=2&after=2026-03-29T00%3A45%3A00%2B00%3A00")
    assert response.status_code == 200, response.text
    assert [f["at"] for f in response.json()["fires"]] == ["2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"]
    assert created.json()["schedule"] == {**LONDON_SPRING, "gap": "jump", "overlap": "auto"}


def test_upcoming_of_an_unknown_job_is_404_and_a_bad_count_422(api: Harness) -> None:
    assert api.get("/jobs/nope/upcoming").status_code == 404
    job = {"name": "x", "handler": "noop", "schedule": {"kind": "interval", "seconds": 5}}
    job_id = api.post("/jobs", json=job).json()["id"]
    assert api.get(f"/jobs/{job_id}/upcoming?count=1001").status_code == 422
    assert api.get(f"/jobs/{job_id}/upcoming?after=yesterday").status_code == 422


def test_both_are_in_the_openapi_document(api: Harness) -> None:
    document = api.get("/openapi.json").json()
    assert document["paths"]["/jobs/{job_id}/upcoming"]["get"]["operationId"] == "upcomingFires"
    assert document["paths"]["/schedules/preview"]["post"]["operationId"] == "previewSchedule"


# -- ticklock cron --------------------------------------------------------------------------------------


def test_the_cron_command_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["cron", "0 30 * * * *", "--tz", "Europe/London", "--after", "2026-03-29T00:00:00Z", "--count", "3"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["#", "UTC", "local", "(Europe/London)", "clock", "change"]
    assert lines[1].split() == ["1", "2026-03-29", "00:30:00Z", "2026-03-29", "00:30:00", "+0000"]
    assert lines[2].split()[:6] == ["2", "2026-03-29", "01:00:00Z", "2026-03-29", "02:00:00", "+0100"]
    assert "gap: 01:30:00 did not exist, ran as the clocks jumped" in lines[2]
    assert len(lines) == 4


def test_the_cron_command_marks_passes_and_takes_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["cron", "0 0 1 * * *", "--tz", "Europe/London", "--after", "2026-10-24T12:00:00Z", "--count", "2"]
    assert main([*argv, "--overlap", "both"]) == 0
    out = capsys.readouterr().out
    assert "overlap: first pass of 01:00:00" in out and "overlap: second pass of 01:00:00" in out


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["cron", "0 0 0 30 2 *"], "never fires"),
        (["cron", "@daily", "--tz", "Mars/Base"], "unknown timezone"),
        (["cron", "@daily", "--after", "2026-01-01"], "RFC 3339"),
        (["cron", "@daily", "--count", "0"], "--count must be from 1 to 1000"),
    ],
)
def test_the_cron_command_says_what_is_wrong(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and fragment in captured.err


def test_a_job_whose_every_fire_a_gap_skips_is_refused_and_its_preview_is_empty(api: Harness) -> None:
    schedule = {"kind": "cron", "expr": "0 30 1 ? 3 0L", "timezone": "Europe/London", "gap": "skip"}
    refused = api.post("/jobs", json={"name": "never", "handler": "noop", "schedule": schedule})
    assert refused.status_code == 422, refused.text
    detail = refused.json()["details"][0]
    assert detail["field"] == "schedule.expr"
    assert "never fires in Europe/London with gap=skip" in detail["message"]
    assert api.stored() == []
    assert preview(api, {"schedule": schedule}).json()["fires"] == []
    jumping = api.post("/jobs", json={"name": "jumps", "handler": "noop", "schedule": {**schedule, "gap": "jump"}})
    assert jumping.status_code == 201, jumping.text
    changed = api.patch(f"/jobs/{jumping.json()['id']}", json={"schedule": schedule})
    assert changed.status_code == 422 and "gap=skip" in changed.text
