"""``POST /jobs:batch``: many jobs in one request, all or none, every job at fault named.

The harness (conftest.py): Limits(max_timeout=3600, max_payload_bytes=256), a 4096-byte body limit for
the other routes and a FakeClock at 2026-01-01T00:00:00Z.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from ticklock.api.schemas.jobs import JobBatchOut

START = datetime(2026, 1, 1, tzinfo=UTC)
Harness = Any  # conftest.ApiHarness


def item(name: str, **changes: Any) -> dict[str, Any]:
    return {"name": name, "handler": "noop", "schedule": {"kind": "cron", "expr": "@hourly"}, **changes}


def names(api: Harness) -> list[str]:
    return sorted(job.name for job in api.store.list_jobs(limit=5000))


def error_of(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    data: dict[str, Any] = response.json()
    assert data["error"] == code, data
    return data


def test_a_batch_creates_every_job_in_order_and_each_reads_back_as_post_jobs_made_it(api: Harness) -> None:
    items = [
        item("cron", schedule={"kind": "cron", "expr": "0 30 9 * * MON-FRI", "timezone": "Europe/London"}),
        item("interval", schedule={"kind": "interval", "seconds": 90}, payload={"k": [1]}, timeout=5.0),
        item("once", schedule={"kind": "once", "at": "2026-01-02T00:00:00Z"}, enabled=False, max_retries=2),
    ]
    response = api.post("/jobs:batch", json={"jobs": items})
    assert response.status_code == 201, response.text
    created = response.json()["items"]
    assert [j["name"] for j in created] == ["cron", "interval", "once"]
    # written without the model, byte for byte what the documented model writes
    assert response.content == JobBatchOut.model_validate(response.json()).model_dump_json().encode()
    assert len({j["id"] for j in created}) == 3
    jobs = []
    for item_out in created:
        assert set(item_out) == {"id", "name", "enabled", "next_run_at"}
        job = api.get(f"/jobs/{item_out['id']}").json()
        assert {k: job[k] for k in item_out} == item_out
        jobs.append(job)
    by_name = {j["name"]: j for j in jobs}
    assert by_name["cron"]["next_run_at"] == "2026-01-01T09:30:00Z"
    assert by_name["interval"]["next_run_at"] == (START + timedelta(seconds=90)).isoformat().replace("+00:00", "Z")
    assert by_name["interval"]["payload"] == {"k": [1]} and by_name["interval"]["timeout"] == 5.0
    assert by_name["once"]["enabled"] is False and by_name["once"]["max_retries"] == 2
    # the single-job route makes the same job of the same definition
    single = api.post("/jobs", json=item("single", schedule=items[0]["schedule"])).json()
    same = {k for k in single if k not in ("id", "name")}
    assert {k: single[k] for k in same} == {k: by_name["cron"][k] for k in same}


def test_every_invalid_job_is_named_by_its_place_and_nothing_is_created(api: Harness) -> None:
    items = [
        item("fine-0"),
        item("bad-handler", handler="nope"),
        item("fine-2"),
        item("bad-cron", schedule={"kind": "cron", "expr": "61 * * * * *"}),
        item("bad-timeout", timeout=7200.0),
        item("past", schedule={"kind": "once", "at": "2025-01-01T00:00:00Z"}),
    ]
    data = error_of(api.post("/jobs:batch", json={"jobs": items}), 422, "validation_error")
    fields = [d["field"] for d in data["details"]]
    assert "jobs.3.schedule.cron.expr" in fields, data  # pydantic's own, with the item's place
    assert names(api) == []
    # the same batch with the schema's error fixed: the domain's checks, each at its place
    items[3] = item("fine-3")
    data = error_of(api.post("/jobs:batch", json={"jobs": items}), 422, "invalid_job")
    assert [d["field"] for d in data["details"]] == ["jobs.1.handler", "jobs.4.timeout", "jobs.5.schedule.at"]
    assert data["message"].startswith("jobs.1.handler: unknown handler 'nope'"), data
    assert "(and 2 more)" in data["message"]
    assert names(api) == []


def test_a_name_twice_in_the_batch_is_invalid(api: Harness) -> None:
    data = error_of(
        api.post("/jobs:batch", json={"jobs": [item("a"), item("b"), item("a"), item("a")]}), 422, "invalid_job"
    )
    assert data["details"] == [
        {"field": "jobs.2.name", "message": "'a' is jobs.0's name too"},
        {"field": "jobs.3.name", "message": "'a' is jobs.0's name too"},
    ]
    assert names(api) == []


def test_a_name_taken_already_is_a_conflict_naming_it_and_nothing_is_created(api: Harness) -> None:
    assert api.post("/jobs", json=item("taken")).status_code == 201
    data = error_of(
        api.post("/jobs:batch", json={"jobs": [item("new-0"), item("taken"), item("new-2")]}), 409, "duplicate_name"
    )
    assert "'taken'" in data["message"]
    assert names(api) == ["taken"]


def test_the_batch_is_bounded_in_jobs_and_must_hold_one(api: Harness) -> None:
    data = error_of(api.post("/jobs:batch", json={"jobs": []}), 422, "validation_error")
    assert data["details"][0]["field"] == "jobs"
    too_many = [item(f"j{i}") for i in range(1001)]
    data = error_of(api.post("/jobs:batch", json={"jobs": too_many}), 422, "validation_error")
    assert data["details"][0]["field"] == "jobs"
    assert "1000" in data["details"][0]["message"]
    error_of(api.post("/jobs:batch", json=[item("x")]), 422, "validation_error")  # not an object
    error_of(api.post("/jobs:batch", json={"jobs": [item("x")], "extra": 1}), 422, "validation_error")
    assert names(api) == []


def test_a_batch_takes_a_body_larger_than_one_job_may_send(api: Harness) -> None:
    """The other routes take 4,096 bytes here; a batch of 1,000 jobs is ~100 KB and is taken whole."""
    items = [item(f"job-{i:04}", payload={"n": i}) for i in range(1000)]
    raw = json.dumps({"jobs": items}).encode()
    assert len(raw) > 25 * 4096
    response = api.post("/jobs:batch", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 201, response.text[:300]
    assert len(response.json()["items"]) == 1000
    assert len(names(api)) == 1000
    single = api.post("/jobs", content=json.dumps(item("big", payload={"x": "y" * 5000})).encode(),
                      headers={"content-type": "application/json"})  # fmt: skip
    error_of(single, 413, "too_large")


def test_a_batch_larger_than_its_body_limit_is_refused_unread(api: Harness) -> None:
    raw = b'{"jobs": [' + b" " * (5 * 1000 * 1000) + b"]}"
    response = api.post("/jobs:batch", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 413, response.text[:300]
    assert names(api) == []


def test_batches_in_flight_are_bounded_apart_from_other_requests(api: Harness) -> None:
    """Four batches whose bodies have not arrived hold the batch route's slots: a fifth is refused at once
    (503, Retry-After) while a single create still goes through, and a batch is taken again once one ends."""
    from ticklock.api.asgi import LARGE_IN_FLIGHT

    async def scenario() -> tuple[list[int], int, int]:
        release = asyncio.Event()

        def call(path: str, body: bytes, *, wait: bool) -> Any:
            answer: list[dict[str, Any]] = []
            sent = False

            async def receive() -> dict[str, Any]:
                nonlocal sent
                if wait:
                    await release.wait()
                if sent:
                    await asyncio.sleep(3600)
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}

            async def send(message: dict[str, Any]) -> None:
                answer.append(message)

            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            scope = {"type": "http", "method": "POST", "path": path, "headers": headers, "query_string": b""}
            return answer, api.app(scope, receive, send)

        def status(answer: list[dict[str, Any]]) -> int:
            return int(next(m["status"] for m in answer if m["type"] == "http.response.start"))

        batch = json.dumps({"jobs": [item("slow")]}).encode()
        held = [call("/jobs:batch", batch.replace(b"slow", f"slow-{i}".encode()), wait=True) for i in range(4)]
        tasks = [asyncio.ensure_future(coro) for _, coro in held]
        await asyncio.sleep(0.05)
        refused, coro = call("/jobs:batch", json.dumps({"jobs": [item("fifth")]}).encode(), wait=False)
        await coro
        single, coro = call("/jobs", json.dumps(item("single")).encode(), wait=False)
        await coro
        release.set()
        await asyncio.gather(*tasks)
        again, coro = call("/jobs:batch", json.dumps({"jobs": [item("after")]}).encode(), wait=False)
        await coro
        return [status(a) for a, _ in held], status(refused), status(single) * 1000 + status(again)

    assert LARGE_IN_FLIGHT == 4
    held, refused, rest = asyncio.run(scenario())
    assert held == [201] * 4
    assert refused == 503
    assert divmod(rest, 1000) == (201, 201)
    assert names(api) == ["after", "single", "slow-0", "slow-1", "slow-2", "slow-3"]
