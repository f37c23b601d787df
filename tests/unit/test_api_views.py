"""GET /jobs with search, filters, sorts and pages; GET /overview; the schedule in words on jobs and
previews: what the dashboard reads, through the API's own validation."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.unit.conftest import API_START, ApiHarness
from tests.unit.test_api_fires import ran
from ticklock.domain.executions import ExecutionStatus
from ticklock.domain.ledger import LedgerEntry, Reason

T = API_START


def create(api: ApiHarness, name: str, expr: str = "0 * * * * *", **extra: Any) -> dict[str, Any]:
    body = {"name": name, "handler": "noop", "schedule": {"kind": "cron", "expr": expr}, **extra}
    response = api.post("/jobs", json=body)
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    return job


def finish(api: ApiHarness, job_id: str, seconds: int, status: ExecutionStatus) -> None:
    execution = ran(job_id, seconds).with_changes(id=f"{job_id}:{seconds}", status=ExecutionStatus.RUNNING,
                                                  finished_at=None)  # fmt: skip
    api.store.start_execution(execution)
    done = execution.with_changes(status=status, finished_at=T + timedelta(seconds=seconds + 1), duration=1.0)
    assert api.store.finish_execution(done)


def names(api: ApiHarness, **params: Any) -> list[str]:
    response = api.get("/jobs", params=params)
    assert response.status_code == 200, response.text
    return [j["name"] for j in response.json()["items"]]


def test_jobs_carry_their_schedule_in_words_and_their_last_run(api: ApiHarness) -> None:
    job = create(api, "weekdays", "0 30 9 * * MON-FRI", **{"schedule": {"kind": "cron", "expr": "0 30 9 * * MON-FRI",
                                                                        "timezone": "Europe/Paris"}})  # fmt: skip
    assert job["schedule_text"] == "at 09:30:00 on Monday to Friday, Europe/Paris time"
    assert job["last_run"] is None
    finish(api, job["id"], 1, ExecutionStatus.SUCCESS)
    finish(api, job["id"], 2, ExecutionStatus.FAILED)
    got = api.get(f"/jobs/{job['id']}").json()["last_run"]
    assert got == {"status": "failed", "at": (T + timedelta(seconds=3)).isoformat().replace("+00:00", "Z"),
                   "runs": 2, "ok": 1, "success_rate": 0.5}  # fmt: skip


def test_search_state_outcome_and_sort(api: ApiHarness) -> None:
    ok = create(api, "backup-db")
    bad = create(api, "Report-Daily")
    create(api, "cleanup")
    paused = create(api, "backup-logs")
    api.post(f"/jobs/{paused['id']}/pause", json={"note": "disk full"})
    finish(api, ok["id"], 1, ExecutionStatus.SUCCESS)
    finish(api, bad["id"], 2, ExecutionStatus.TIMEOUT)
    assert names(api, q="BACKUP", sort="name") == ["backup-db", "backup-logs"]
    assert names(api, q="noop", sort="-name") == ["cleanup", "backup-logs", "backup-db", "Report-Daily"]
    assert names(api, state="failing") == ["Report-Daily"]
    assert names(api, state="paused") == ["backup-logs"]
    assert names(api, outcome="none", sort="name") == ["backup-logs", "cleanup"]
    assert names(api, outcome="success") == ["backup-db"]
    never = sorted((j["id"], j["name"]) for j in api.get("/jobs").json()["items"] if j["last_run"] is None)
    # by last run, newest first; the jobs that never ran last, by id descending
    assert names(api, sort="-last_at") == ["Report-Daily", "backup-db", *[n for _, n in reversed(never)]]


def test_pages_by_a_sort_follow_next_to_the_end(api: ApiHarness) -> None:
    for i in range(7):
        create(api, f"job-{6 - i}")
    seen, after = [], None
    while True:
        params: dict[str, Any] = {"sort": "name", "limit": 3, **({"after": after} if after else {})}
        body = api.get("/jobs", params=params).json()
        seen += [j["name"] for j in body["items"]]
        after = body["next"]
        if after is None:
            break
    assert seen == [f"job-{i}" for i in range(7)]
    by_id = api.get("/jobs", params={"limit": 2}).json()
    assert by_id["next"] == by_id["items"][-1]["id"]  # by id, ``next`` is the id, as before sorting existed


def test_a_bad_cursor_or_parameter_is_a_422_naming_it(api: ApiHarness) -> None:
    create(api, "a")
    response = api.get("/jobs", params={"sort": "name", "after": "not-a-cursor"})
    assert response.status_code == 422, response.text
    assert response.json()["details"][0]["field"] == "query.after"
    for params in ({"state": "sleepy"}, {"sort": "-id"}, {"outcome": "running"}, {"q": ""}, {"q": "x" * 201}):
        response = api.get("/jobs", params=params)
        assert response.status_code == 422, (params, response.text)
        assert response.json()["details"][0]["field"].startswith("query."), response.text


def test_overview_counts_states_steps_lag_failures_and_alerts(api: ApiHarness) -> None:
    job = create(api, "every-minute")
    other = create(api, "other")
    api.post(f"/jobs/{other['id']}/pause")
    api.clock.advance(600)  # now T+10 min
    finish(api, job["id"], 60, ExecutionStatus.SUCCESS)
    finish(api, job["id"], 120, ExecutionStatus.FAILED)
    finish(api, job["id"], 121, ExecutionStatus.SUCCESS)
    # three slots skipped from T+3 min to T+5 min: one per step, by the time they cover
    api.store.record_fire(
        LedgerEntry(job["id"], Reason.OVERLAP_SKIP, T + timedelta(minutes=3), T + timedelta(minutes=5), 3, T)
    )
    response = api.get("/overview", params={"window": 10, "step": 60})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["jobs"] == {
        "total": 2,
        "enabled": 1,
        "paused": 1,
        "held": 0,
        "disabled": 0,
        "done": 0,
        "failing": 0,
        "alerting": 0,
    }
    steps = {s["at"][11:16]: s["counts"] for s in body["activity"] if s["counts"]}
    hh = T.strftime("%H")
    assert steps == {
        f"{hh}:01": {"success": 1},
        f"{hh}:02": {"failed": 1, "success": 1},
        f"{hh}:03": {"skipped": 1},
        f"{hh}:04": {"skipped": 1},
        f"{hh}:05": {"skipped": 1},
    }
    assert len(body["activity"]) == 11  # every step of the window, empty ones too
    assert body["lag"]["sample"] == 3 and body["lag"]["p50"] == 0.0
    assert [f["status"] for f in body["failures"]] == ["failed"]
    assert body["alerts"] == []
    assert api.get("/overview", params={"window": 0}).status_code == 422


def test_time_sorts_page_through_their_cursors_jobs_without_a_value_included(api: ApiHarness) -> None:
    made = [create(api, f"t-{i}") for i in range(6)]
    for i, job in enumerate(made[:4]):  # two jobs never run: no last_at
        finish(api, job["id"], 10 * (i % 2), ExecutionStatus.SUCCESS)  # ties on last_at, broken by id
    for sort in ("last_at", "-last_at", "next_run_at", "-next_run_at"):
        whole = names(api, sort=sort, limit=100)
        seen, after = [], None
        while True:
            body = api.get("/jobs", params={"sort": sort, "limit": 2, **({"after": after} if after else {})}).json()
            seen += [j["name"] for j in body["items"]]
            after = body["next"]
            if after is None:
                break
        assert seen == whole and len(seen) == 6, sort  # each once, in the one-page order
    first = api.get("/jobs", params={"sort": "name", "limit": 2}).json()["next"]
    for other in ("-name", "last_at"):  # a cursor is for the listing that made it
        response = api.get("/jobs", params={"sort": other, "after": first})
        assert response.status_code == 422 and response.json()["details"][0]["field"] == "query.after"


def test_the_lag_percentiles_are_nearest_rank() -> None:
    from ticklock.api.views import _percentile

    hundred = [float(i) for i in range(1, 101)]
    assert (_percentile(hundred, 0.5), _percentile(hundred, 0.99), _percentile(hundred, 1.0)) == (50.0, 99.0, 100.0)
    assert (_percentile([1.0, 2.0], 0.5), _percentile([7.0], 0.99), _percentile([], 0.5)) == (1.0, 7.0, None)


def test_overview_lists_the_alerts_of_the_first_jobs_by_name_and_counts_them_all(api: ApiHarness) -> None:
    raised = {"late": {"raised_at": "2026-03-02T12:00:00+00:00", "detail": "late"}}
    for name in ("d", "b", "e", "a", "c"):
        job = create(api, name, alerts={"late_after": 60.0})
        assert api.store.set_open_alerts(job["id"], expected={}, new=raised)
    create(api, "quiet", alerts={"late_after": 60.0})
    body = api.get("/overview", params={"alerts": 3}).json()
    assert [a["job_name"] for a in body["alerts"]] == ["a", "b", "c"]
    assert body["jobs"]["alerting"] == 5
    assert [a["job_name"] for a in api.get("/overview").json()["alerts"]] == ["a", "b", "c", "d", "e"]
    assert api.get("/overview", params={"alerts": 0}).json()["alerts"] == []
    assert api.get("/overview", params={"alerts": 101}).status_code == 422
