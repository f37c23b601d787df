"""Backfill over the API: POST /jobs/{id}/backfill runs a past window's fires (202), lists them, says which
an earlier backfill ran, and refuses what it cannot do, naming the field."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.unit.conftest import ApiHarness

JOB = {"name": "bf", "handler": "noop", "schedule": {"kind": "cron", "expr": "0 * * * * *"}}


def _window(api: ApiHarness, minutes: int) -> dict[str, str]:
    now = api.clock.now()
    return {"from": (now - timedelta(minutes=minutes)).isoformat(), "to": now.isoformat()}


def test_a_backfill_is_accepted_listed_and_pending_on_the_job(api: ApiHarness) -> None:
    job = api.post("/jobs", json=JOB).json()
    dry = api.post(f"/jobs/{job['id']}/backfill", json={**_window(api, 10), "dry_run": True})
    assert dry.status_code == 202, dry.text
    assert dry.json()["dry_run"] is True and dry.json()["count"] == len(dry.json()["fires"]) >= 10
    assert api.get(f"/jobs/{job['id']}").json()["backfill"] is None  # a dry run writes nothing
    real = api.post(f"/jobs/{job['id']}/backfill", json=_window(api, 10)).json()
    assert real["pending"]["next_at"] == real["fires"][0]["at"].replace("Z", "+00:00")
    assert api.get(f"/jobs/{job['id']}").json()["backfill"]["overlap"] == "buffer_all"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"to": "2026-01-01T00:00:00Z"}, "from"),
        ({"from": "yesterday", "to": "2026-01-01T00:00:00Z"}, "from"),
        ({"from": "2026-01-01T00:00:00Z", "to": "2999-01-01T00:00:00Z"}, "to"),
        ({"from": "2025-01-01T00:00:00Z", "to": "2025-01-02T00:00:00Z"}, "from"),  # 1,440 fires: too many
        ({"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T00:01:00Z", "overlap": "skip"}, "overlap"),
        ({"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T00:01:00Z", "dry_run": "yes"}, "dry_run"),
    ],
)
def test_a_bad_backfill_is_refused_naming_the_field(api: ApiHarness, body: dict[str, Any], field: str) -> None:
    job = api.post("/jobs", json=JOB).json()
    response = api.post(f"/jobs/{job['id']}/backfill", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["details"][0]["field"] == field
    assert api.get(f"/jobs/{job['id']}").json()["version"] == job["version"]
