"""Holds over the API: a pause with a note or until an instant (POST /pause, body optional), a skip of
the next fires (POST /skip), shown on the job as ``hold`` while in force; every field validated."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.unit.conftest import ApiHarness

JOB = {"name": "h", "handler": "noop", "schedule": {"kind": "cron", "expr": "*/10 * * * * *"}}


def test_a_pause_without_a_body_still_pauses(api: ApiHarness) -> None:
    job = api.post("/jobs", json=JOB).json()
    paused = api.post(f"/jobs/{job['id']}/pause")
    assert paused.status_code == 200, paused.text
    assert paused.json()["enabled"] is False and paused.json()["hold"]["kind"] == "pause"
    assert paused.json()["hold"]["note"] is None and paused.json()["hold"]["until"] is None


def test_a_pause_with_a_note_until_an_instant_is_shown_and_resumed_early(api: ApiHarness) -> None:
    job = api.post("/jobs", json=JOB).json()
    until = (api.clock.now() + timedelta(minutes=5)).isoformat()
    held = api.post(f"/jobs/{job['id']}/pause", json={"note": "deploy freeze", "until": until}).json()
    assert held["enabled"] is True and held["hold"]["note"] == "deploy freeze"
    assert held["hold"]["resumes_at"] == held["next_run_at"] and held["hold"]["until"] is not None
    resumed = api.post(f"/jobs/{job['id']}/resume").json()
    assert resumed["hold"] is None and resumed["next_run_at"] < held["next_run_at"]


def test_a_skip_moves_the_next_fire_and_is_shown(api: ApiHarness) -> None:
    job = api.post("/jobs", json=JOB).json()
    skipped = api.post(f"/jobs/{job['id']}/skip", json={"count": 3, "note": "holiday"})
    assert skipped.status_code == 200, skipped.text
    body = skipped.json()
    assert body["hold"]["kind"] == "skip" and body["hold"]["count"] == 3
    assert body["hold"]["skipped_from"] == job["next_run_at"]
    schema = api.get("/openapi.json").json()
    assert "/jobs/{job_id}/skip" in schema["paths"]
    assert schema["paths"]["/jobs/{job_id}/pause"]["post"]["requestBody"]["required"] is False


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("skip", {}, "count"),
        ("skip", {"count": 0}, "count"),
        ("skip", {"count": 1001}, "count"),
        ("skip", {"count": "3"}, "count"),
        ("skip", {"count": 1, "note": 5}, "note"),
        ("pause", {"note": "x" * 501}, "note"),
        ("pause", {"until": "tomorrow"}, "until"),
        ("pause", {"until": "2020-01-01T00:00:00Z"}, "until"),
        ("pause", {"for": 5}, "for"),
    ],
)
def test_a_bad_hold_is_refused_naming_the_field(api: ApiHarness, path: str, body: dict[str, Any], field: str) -> None:
    job = api.post("/jobs", json=JOB).json()
    response = api.post(f"/jobs/{job['id']}/{path}", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["details"][0]["field"] == field
    assert api.get(f"/jobs/{job['id']}").json()["version"] == job["version"]  # nothing written


def test_a_skip_of_a_paused_job_conflicts(api: ApiHarness) -> None:
    job = api.post("/jobs", json=JOB).json()
    api.post(f"/jobs/{job['id']}/pause")
    response = api.post(f"/jobs/{job['id']}/skip", json={"count": 1})
    assert response.status_code == 409 and "paused" in response.json()["message"]
