"""GET /jobs/{id}/fires and GET /fires: what became of every fire of a window, from the ledger, the
executions and the schedule, with their validation."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.unit.conftest import API_START, ApiHarness
from ticklock.domain.executions import Execution, ExecutionStatus
from ticklock.domain.fires import Trigger
from ticklock.domain.ledger import LedgerEntry, Reason

T = API_START


def at(seconds: int) -> str:
    return (T + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def cron_job(api: ApiHarness) -> dict[str, Any]:
    response = api.post(
        "/jobs", json={"name": "every-10", "handler": "noop", "schedule": {"kind": "cron", "expr": "*/10 * * * * *"}}
    )
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    return job


def ran(job_id: str, seconds: int) -> Execution:
    when = T + timedelta(seconds=seconds)
    return Execution(
        id=f"e{seconds}",
        job_id=job_id,
        fire_key=f"{job_id}:{seconds}",
        handler="noop",
        trigger=Trigger.SCHEDULE,
        scheduled_at=when,
        started_at=when,
        deadline_at=when + timedelta(seconds=60),
        run_token="r",
        owner="o",
        status=ExecutionStatus.SUCCESS,
        attempts=1,
        finished_at=when,
        duration=0.0,
    )


def test_a_jobs_fires_account_for_every_slot_of_the_window(api: ApiHarness) -> None:
    job = cron_job(api)  # created at T; its first slot is T+10
    api.store.start_execution(ran(job["id"], 10))
    span = LedgerEntry(job["id"], Reason.COLLAPSED, T + timedelta(seconds=20), T + timedelta(seconds=40), 3, T)
    api.store.record_fire(span)
    api.store.record_fire(
        LedgerEntry.one(job["id"], Reason.UNKNOWN_HANDLER, T + timedelta(seconds=50), T, Trigger.SCHEDULE)
    )
    stored = api.store.get_job(job["id"])
    api.store.update_job(stored.with_changes(next_run_at=T + timedelta(seconds=60)), expected_version=stored.version)
    api.clock.advance(55)
    response = api.get(f"/jobs/{job['id']}/fires", params={"from": at(-10), "to": at(70)})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["job_id"], body["from"], body["to"]) == (job["id"], at(-10), at(70))
    got = [(i["at"], i["status"], i["reason"]) for i in body["items"]]
    assert got == [
        (at(70), "upcoming", None),
        (at(60), "upcoming", None),
        (at(50), "skipped", "unknown_handler"),
        (at(40), "missed", "collapsed"),
        (at(30), "missed", "collapsed"),
        (at(20), "missed", "collapsed"),
        (at(10), "ran", None),
        (at(0), "before_created", None),  # created at 0: its first fire is after
        (at(-10), "before_created", None),
    ]
    ran_item = body["items"][6]
    assert ran_item["execution_id"] == "e10" and ran_item["execution_status"] == "success"
    assert body["items"][3]["range"] == {"first": at(20), "last": at(40), "count": 3}
    assert body["items"][2]["range"] is None
    newest = api.get(f"/jobs/{job['id']}/fires", params={"from": at(-10), "to": at(70), "limit": 2}).json()
    assert [i["at"] for i in newest["items"]] == [at(70), at(60)]


def test_the_window_defaults_to_the_last_hour_and_is_validated(api: ApiHarness) -> None:
    job = cron_job(api)
    api.clock.advance(3600)
    body = api.get(f"/jobs/{job['id']}/fires").json()
    assert (body["from"], body["to"]) == (at(0), at(3600))
    for params, field in (
        ({"from": at(10), "to": at(0)}, "query.from"),
        ({"from": at(0), "to": at(32 * 86400)}, "query.from"),
        ({"from": "yesterday"}, "query.from"),
        ({"limit": "0"}, "query.limit"),
        ({"start": at(0)}, "query.start"),
    ):
        response = api.get(f"/jobs/{job['id']}/fires", params=params)
        assert response.status_code == 422, (params, response.text)
        assert field in response.text
    assert api.get("/jobs/nope/fires").status_code == 404


def test_all_fires_that_did_not_run_are_listed_with_filters(api: ApiHarness) -> None:
    a, b = (
        cron_job(api),
        api.post(
            "/jobs", json={"name": "b", "handler": "noop", "schedule": {"kind": "interval", "seconds": 60}}
        ).json(),
    )
    api.store.record_fire(
        LedgerEntry(a["id"], Reason.COLLAPSED, T + timedelta(seconds=20), T + timedelta(seconds=40), 3, T)
    )
    api.store.record_fire(
        LedgerEntry.one(b["id"], Reason.LOCK_UNAVAILABLE, T + timedelta(seconds=30), T, Trigger.SCHEDULE)
    )
    api.clock.advance(120)
    items = api.get("/fires").json()["items"]
    assert [(i["job_id"], i["outcome"], i["reason"], i["count"]) for i in items] == [
        (b["id"], "skipped", "lock_unavailable", 1),
        (a["id"], "missed", "collapsed", 3),
    ]
    assert [i["job_id"] for i in api.get("/fires", params={"status": "missed"}).json()["items"]] == [a["id"]]
    assert [i["job_id"] for i in api.get("/fires", params={"reason": "lock_unavailable"}).json()["items"]] == [b["id"]]
    assert api.get("/fires", params={"reason": "because"}).status_code == 422
    assert api.get("/fires", params={"to": at(10)}).json()["items"] == []


def test_the_slots_a_pause_let_pass_are_missed_as_paused(api: ApiHarness) -> None:
    job = cron_job(api)  # waits for T+10
    api.clock.advance(5)
    assert api.post(f"/jobs/{job['id']}/pause").status_code == 200
    api.clock.advance(40)  # T+45: the slots 10, 20, 30, 40 pass while it is paused
    live = api.get(f"/jobs/{job['id']}/fires", params={"from": at(0), "to": at(60)}).json()["items"]
    assert [(i["at"], i["status"], i["reason"]) for i in live][:4] == [
        (at(60), "paused", None),
        (at(50), "paused", None),
        (at(40), "missed", "paused"),
        (at(30), "missed", "paused"),
    ]
    resumed = api.post(f"/jobs/{job['id']}/resume").json()
    assert resumed["next_run_at"] == at(50)
    [entry] = api.get("/fires", params={"reason": "paused"}).json()["items"]
    assert (entry["first_at"], entry["last_at"], entry["count"], entry["outcome"]) == (at(10), at(40), 4, "missed")
    items = api.get(f"/jobs/{job['id']}/fires", params={"from": at(0), "to": at(60)}).json()["items"]
    assert [(i["at"], i["status"]) for i in items][:2] == [(at(60), "upcoming"), (at(50), "upcoming")]
    assert {i["status"] for i in items if at(10) <= i["at"] <= at(40)} == {"missed"}
    assert api.post(f"/jobs/{job['id']}/resume").status_code == 200  # resuming again records nothing new
    assert len(api.get("/fires", params={"reason": "paused"}).json()["items"]) == 1


def test_all_fires_lists_the_runs_too_by_their_status(api: ApiHarness) -> None:
    a = cron_job(api)
    failed = ran(a["id"], 10).with_changes(status=ExecutionStatus.FAILED, error="RuntimeError: no")
    api.store.start_execution(failed)
    api.store.start_execution(ran(a["id"], 30))
    api.store.record_fire(LedgerEntry.one(a["id"], Reason.OVERLAP_SKIP, T + timedelta(seconds=20), T, Trigger.SCHEDULE))
    api.clock.advance(120)
    every = api.get("/fires").json()["items"]
    assert [(i["first_at"], i["outcome"], i["reason"], i["execution_id"]) for i in every] == [
        (at(30), "ran", "success", "e30"),
        (at(20), "skipped", "overlap_skip", None),
        (at(10), "ran", "failed", "e10"),
    ]
    assert [i["execution_id"] for i in api.get("/fires", params={"status": "failed"}).json()["items"]] == ["e10"]
    assert len(api.get("/fires", params={"status": "ran"}).json()["items"]) == 2
    assert [i["outcome"] for i in api.get("/fires", params={"reason": "overlap_skip"}).json()["items"]] == ["skipped"]
    assert [i["first_at"] for i in api.get("/fires", params={"limit": 1}).json()["items"]] == [at(30)]
