"""What the API says a job is doing is exactly so (issue 46, items 3-6): one state per job (enabled,
paused, held, disabled, done) with conditions on top (failing, alerting), filterable; the fires to come
from the fire the job waits for, with what a pause, a hold or a skip keeps back marked; and a listing by
next fire that puts the jobs without one after the others."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from tests.unit.conftest import ApiHarness

CRON = {"name": "c", "handler": "noop", "schedule": {"kind": "cron", "expr": "*/10 * * * * *"}}


def _job(api: ApiHarness, **fields: Any) -> dict[str, Any]:
    made = api.post("/jobs", json={**CRON, **fields})
    assert made.status_code == 201, made.text
    return dict(made.json())


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_a_held_job_is_held_everywhere_and_listed_under_held(api: ApiHarness) -> None:
    job = _job(api)
    until = (api.clock.now() + timedelta(minutes=5)).isoformat()
    held = api.post(f"/jobs/{job['id']}/pause", json={"until": until}).json()
    assert held["state"] == "held" and held["enabled"] is True
    assert [j["id"] for j in api.get("/jobs?state=held").json()["items"]] == [job["id"]]
    assert api.get("/jobs?state=enabled").json()["items"] == []
    assert api.get("/overview").json()["jobs"]["held"] == 1
    assert api.post(f"/jobs/{job['id']}/resume").json()["state"] == "enabled"


def test_each_state_and_condition_is_named_on_the_job(api: ApiHarness) -> None:
    enabled, paused, skipping = _job(api, name="e"), _job(api, name="p"), _job(api, name="s")
    api.post(f"/jobs/{paused['id']}/pause", json={"note": "n"})
    api.post(f"/jobs/{skipping['id']}/skip", json={"count": 2})
    once = _job(api, name="o", schedule={"kind": "once", "at": (api.clock.now() + timedelta(hours=1)).isoformat()})
    states = {j["name"]: (j["state"], j["conditions"]) for j in api.get("/jobs").json()["items"]}
    assert states == {"e": ("enabled", []), "p": ("paused", []), "s": ("held", []), "o": ("enabled", [])}
    assert enabled["state"] == "enabled" and once["state"] == "enabled"
    for state in ("enabled", "paused", "held", "disabled", "done", "failing", "alerting"):
        assert api.get(f"/jobs?state={state}").status_code == 200, state


def test_upcoming_fires_start_from_the_fire_the_job_waits_for(api: ApiHarness) -> None:
    job = _job(api, schedule={"kind": "interval", "seconds": 30})
    api.clock.advance(17)  # the job still waits for its first fire, 13 s from now
    fires = api.get(f"/jobs/{job['id']}/upcoming?count=3").json()["fires"]
    assert fires[0]["at"] == job["next_run_at"]
    assert [_at(f["at"]) - _at(job["next_run_at"]) for f in fires] == [timedelta(seconds=30 * n) for n in range(3)]
    assert {f["status"] for f in fires} == {"due"}


def test_a_hold_marks_the_fires_it_keeps_back_and_lists_the_one_it_resumes_at(api: ApiHarness) -> None:
    job = _job(api)
    until = api.clock.now() + timedelta(seconds=35)
    held = api.post(f"/jobs/{job['id']}/pause", json={"until": until.isoformat()}).json()
    fires = api.get(f"/jobs/{job['id']}/upcoming?count=6").json()["fires"]
    kept = [f for f in fires if f["status"] == "held"]
    due = [f for f in fires if f["status"] == "due"]
    assert kept and all(_at(f["at"]) < until for f in kept)
    assert due[0]["at"] == held["next_run_at"] == held["hold"]["resumes_at"]
    assert fires == sorted(fires, key=lambda f: f["starts_at"])


def test_a_skip_marks_exactly_the_fires_it_skips(api: ApiHarness) -> None:
    job = _job(api)
    api.post(f"/jobs/{job['id']}/skip", json={"count": 2})
    fires = api.get(f"/jobs/{job['id']}/upcoming?count=4").json()["fires"]
    assert [f["status"] for f in fires] == ["skipped", "skipped", "due", "due"]
    assert fires[0]["at"] == job["next_run_at"]


def test_a_paused_job_lists_no_fire_that_will_run(api: ApiHarness) -> None:
    job = _job(api)
    api.post(f"/jobs/{job['id']}/pause")
    fires = api.get(f"/jobs/{job['id']}/upcoming?count=5").json()["fires"]
    assert len(fires) == 5 and {f["status"] for f in fires} == {"paused"}


def test_a_pending_trigger_is_listed_first(api: ApiHarness) -> None:
    job = _job(api)
    api.post(f"/jobs/{job['id']}/trigger")
    first = api.get(f"/jobs/{job['id']}/upcoming?count=2").json()["fires"][0]
    assert (first["trigger"], first["status"]) == ("manual", "due")


def test_by_next_fire_the_jobs_without_one_come_after_in_either_direction(api: ApiHarness) -> None:
    for i in range(4):
        job = _job(api, name=f"j{i}", schedule={"kind": "interval", "seconds": 10 + i})
        if i % 2:
            api.post(f"/jobs/{job['id']}/pause")
    api.clock.advance(3600)  # the paused jobs' next_run_at are an hour stale
    for sort in ("next_run_at", "-next_run_at"):
        names = [j["name"] for j in api.get(f"/jobs?sort={sort}").json()["items"]]
        assert set(names[:2]) == {"j0", "j2"} and set(names[2:]) == {"j1", "j3"}, (sort, names)
