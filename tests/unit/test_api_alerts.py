"""Alert rules over the API: given at create, shown, replaced by PATCH, every field validated; the alerts
raised are on the job and in GET /alerts."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.conftest import ApiHarness

JOB = {"name": "a", "handler": "noop", "schedule": {"kind": "cron", "expr": "0 * * * * *"}}
RULES = {"late_after": 60, "no_success_for": 3600, "failures_in_a_row": 3, "email": "ops@example.org"}


def test_alert_rules_are_given_shown_replaced_and_dropped(api: ApiHarness) -> None:
    plain = api.post("/jobs", json=JOB).json()
    assert plain["alerts"] is None and plain["open_alerts"] == []
    job = api.post("/jobs", json={**JOB, "name": "b", "alerts": RULES}).json()
    assert job["alerts"] == {**RULES, "late_after": 60.0, "no_success_for": 3600.0, "webhook": None}
    changed = api.patch(f"/jobs/{job['id']}", json={"alerts": {"failures_in_a_row": 1}}).json()
    assert changed["alerts"]["failures_in_a_row"] == 1 and changed["alerts"]["late_after"] is None
    dropped = api.patch(f"/jobs/{job['id']}", json={"alerts": {}}).json()
    assert dropped["alerts"] is None


def test_the_alerts_raised_are_on_the_job_and_listed(api: ApiHarness) -> None:
    job = api.post("/jobs", json={**JOB, "alerts": RULES}).json()
    raised = {"late": {"raised_at": "2026-03-02T12:00:00+00:00", "detail": "the fire due at ... has not started"}}
    assert api.store.set_open_alerts(job["id"], expected={}, new=raised)
    shown = api.get(f"/jobs/{job['id']}").json()["open_alerts"]
    assert shown == [
        {
            "job_id": job["id"],
            "job_name": "a",
            "condition": "late",
            **raised["late"],
            "raised_at": "2026-03-02T12:00:00Z",
        }
    ]
    listed = api.get("/alerts").json()["items"]
    assert [(a["job_id"], a["condition"]) for a in listed] == [(job["id"], "late")]


@pytest.mark.parametrize(
    ("alerts", "field"),
    [
        ({"late_after": 0}, "alerts.late_after"),
        ({"no_success_for": "1h"}, "alerts.no_success_for"),
        ({"failures_in_a_row": 0}, "alerts.failures_in_a_row"),
        ({"failures_in_a_row": 1.5}, "alerts.failures_in_a_row"),
        ({"webhook": "ftp://x"}, "alerts.webhook"),
        ({"webhook": "http://[x"}, "alerts.webhook"),  # an IPv6 host left open: no URL parses it
        ({"webhook": "http:///path"}, "alerts.webhook"),  # no host
        ({"webhook": "http://host:port/"}, "alerts.webhook"),  # a port that is not a number
        ({"email": "nobody"}, "alerts.email"),
        ({"pager": "x"}, "alerts.pager"),
    ],
)
def test_bad_alert_rules_are_refused_naming_the_field(api: ApiHarness, alerts: dict[str, Any], field: str) -> None:
    response = api.post("/jobs", json={**JOB, "alerts": alerts})
    assert response.status_code == 422, response.text
    assert response.json()["details"][0]["field"] == field
