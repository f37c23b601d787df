"""The REST API in process: local_app on a real SQLite store, driven by httpx over ASGI.

The harness (conftest.py) uses Limits(max_timeout=3600, max_payload_bytes=256), a 4096-byte body limit
and a FakeClock at 2026-01-01T00:00:00Z.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatch
from typing import Any

import httpx
import pytest

from ticklock import __version__

START = datetime(2026, 1, 1, tzinfo=UTC)
DROP = object()
Harness = Any  # conftest.ApiHarness; conftest is not importable under --import-mode=importlib


def body(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "job-a",
        "handler": "noop",
        "schedule": {"kind": "cron", "expr": "@hourly"},
    }
    for key, value in changes.items():
        if value is DROP:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def ts(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def create(api: Harness, **changes: Any) -> dict[str, Any]:
    response = api.post("/jobs", json=body(**changes))
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()
    return data


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    data: dict[str, Any] = response.json()
    assert set(data) == {"error", "message", "details"}
    assert isinstance(data["message"], str)
    assert data["message"]
    assert isinstance(data["details"], list)
    if code is not None:
        assert data["error"] == code
    return data


def assert_names_field(data: dict[str, Any], pattern: str) -> None:
    """The message leads with the field, and the details carry it."""
    lead = data["message"].split(":", 1)[0]
    assert fnmatch(lead, pattern), data
    assert any(fnmatch(d.get("field", ""), pattern) for d in data["details"]), data


# -- create -----------------------------------------------------------------------------------------------


def test_create_cron(api: Harness) -> None:
    response = api.post(
        "/jobs",
        json=body(
            schedule={"kind": "cron", "expr": "0 30 9 * * MON-FRI", "timezone": "Europe/London"},
            payload={"k": [1, 2]},
            timeout=12.5,
            max_retries=3,
        ),
    )
    assert response.status_code == 201, response.text
    job = response.json()
    assert response.headers["location"] == f"/jobs/{job['id']}"
    assert job["id"]
    assert job["name"] == "job-a"
    assert job["handler"] == "noop"
    assert job["schedule"] == {
        "kind": "cron",
        "expr": "0 30 9 * * MON-FRI",
        "timezone": "Europe/London",
        "gap": "jump",
        "overlap": "auto",
    }
    assert job["payload"] == {"k": [1, 2]}
    assert job["timeout"] == 12.5
    assert job["max_retries"] == 3
    assert job["enabled"] is True
    assert job["trigger_pending_at"] is None
    assert job["running"] is False
    assert job["version"] == 1
    assert ts(job["created_at"]) == START
    assert ts(job["next_run_at"]) == datetime(2026, 1, 1, 9, 30, tzinfo=UTC)  # Thursday, GMT


def test_create_cron_descriptor_defaults(api: Harness) -> None:
    job = create(api)
    assert job["schedule"] == {"kind": "cron", "expr": "@hourly", "timezone": "UTC", "gap": "jump", "overlap": "auto"}
    assert ts(job["next_run_at"]) == START + timedelta(hours=1)
    assert job["payload"] == {}
    assert job["timeout"] == 60.0
    assert job["max_retries"] == 0


def test_create_interval(api: Harness) -> None:
    response = api.post("/jobs", json=body(schedule={"kind": "interval", "seconds": 30}))
    assert response.status_code == 201
    job = response.json()
    assert response.headers["location"] == f"/jobs/{job['id']}"
    assert job["schedule"] == {"kind": "interval", "seconds": 30}
    assert ts(job["next_run_at"]) == START + timedelta(seconds=30)


def test_create_once(api: Harness) -> None:
    response = api.post("/jobs", json=body(schedule={"kind": "once", "at": "2026-06-01T12:00:00+02:00"}))
    assert response.status_code == 201
    job = response.json()
    assert response.headers["location"] == f"/jobs/{job['id']}"
    assert job["schedule"]["kind"] == "once"
    assert ts(job["schedule"]["at"]) == datetime(2026, 6, 1, 10, tzinfo=UTC)
    assert ts(job["next_run_at"]) == datetime(2026, 6, 1, 10, tzinfo=UTC)


def test_create_paused(api: Harness) -> None:
    job = create(api, enabled=False)
    assert job["enabled"] is False


def test_create_then_get(api: Harness) -> None:
    job = create(api)
    response = api.get(f"/jobs/{job['id']}")
    assert response.status_code == 200
    assert response.json() == job


# -- list -------------------------------------------------------------------------------------------------


def make_five(api: Harness) -> dict[str, dict[str, Any]]:
    jobs = {}
    for name, handler in [("n1", "noop"), ("n2", "noop"), ("n3", "noop"), ("h1", "http.check"), ("h2", "http.check")]:
        payload = {"url": "http://example.invalid/"} if handler == "http.check" else {}
        jobs[name] = create(api, name=name, handler=handler, payload=payload)
    assert api.post(f"/jobs/{jobs['n3']['id']}/pause").status_code == 200
    return jobs


def test_list_empty(api: Harness) -> None:
    response = api.get("/jobs")
    assert response.status_code == 200
    assert response.json() == {"items": [], "next": None}


def test_list_filters(api: Harness) -> None:
    jobs = make_five(api)

    def names(query: str) -> set[str]:
        response = api.get(f"/jobs{query}")
        assert response.status_code == 200, response.text
        return {j["name"] for j in response.json()["items"]}

    assert names("") == set(jobs)
    assert names("?handler=http.check") == {"h1", "h2"}
    assert names("?handler=noop") == {"n1", "n2", "n3"}
    assert names("?enabled=false") == {"n3"}
    assert names("?enabled=true") == {"n1", "n2", "h1", "h2"}
    assert names("?handler=noop&enabled=true") == {"n1", "n2"}
    assert names("?handler=nothing") == set()


def test_list_pagination_follows_next_cursor(api: Harness) -> None:
    jobs = make_five(api)
    seen: list[str] = []
    pages: list[int] = []
    query = "?limit=2"
    for _ in range(10):
        response = api.get(f"/jobs{query}")
        assert response.status_code == 200
        page = response.json()
        pages.append(len(page["items"]))
        seen.extend(j["id"] for j in page["items"])
        if page["next"] is None:
            break
        assert page["next"] == page["items"][-1]["id"]
        query = f"?limit=2&after={page['next']}"
    assert pages == [2, 2, 1]
    assert seen == sorted(j["id"] for j in jobs.values())


def test_list_exact_page_has_no_next(api: Harness) -> None:
    create(api, name="one")
    create(api, name="two")
    page = api.get("/jobs?limit=2").json()
    assert len(page["items"]) == 2
    assert page["next"] is None


@pytest.mark.parametrize("query", ["?limit=0", "?limit=501", "?limit=x", "?enabled=maybe"])
def test_list_bad_query(api: Harness, query: str) -> None:
    data = assert_error(api.get(f"/jobs{query}"), 422)
    name = query[1:].split("=")[0]
    assert name in data["message"]


# -- patch ------------------------------------------------------------------------------------------------


def test_patch_is_partial(api: Harness) -> None:
    job = create(api, payload={"a": 1}, timeout=10)
    response = api.patch(f"/jobs/{job['id']}", json={"timeout": 5})
    assert response.status_code == 200, response.text
    patched = response.json()
    assert patched["timeout"] == 5.0
    assert patched["version"] == job["version"] + 1
    for key in ("name", "handler", "schedule", "payload", "max_retries", "enabled", "next_run_at", "created_at"):
        assert patched[key] == job[key], key
    assert api.get(f"/jobs/{job['id']}").json() == patched


def test_patch_payload_and_name(api: Harness) -> None:
    job = create(api, payload={"a": 1})
    patched = api.patch(f"/jobs/{job['id']}", json={"payload": {"b": 2}, "name": "renamed"}).json()
    assert patched["payload"] == {"b": 2}
    assert patched["name"] == "renamed"
    assert patched["schedule"] == job["schedule"]


def test_patch_schedule_recomputes_next_run_from_now(api: Harness) -> None:
    job = create(api)
    assert ts(job["next_run_at"]) == START + timedelta(hours=1)
    api.clock.advance(100)
    response = api.patch(f"/jobs/{job['id']}", json={"schedule": {"kind": "interval", "seconds": 30}})
    assert response.status_code == 200, response.text
    patched = response.json()
    assert patched["schedule"] == {"kind": "interval", "seconds": 30}
    assert ts(patched["next_run_at"]) == START + timedelta(seconds=130)


def test_patch_cron_timezone_recomputes_next_run(api: Harness) -> None:
    job = create(api, schedule={"kind": "cron", "expr": "0 0 9 * * *"})
    assert ts(job["next_run_at"]) == datetime(2026, 1, 1, 9, tzinfo=UTC)
    patched = api.patch(
        f"/jobs/{job['id']}", json={"schedule": {"kind": "cron", "expr": "0 0 9 * * *", "timezone": "Asia/Tokyo"}}
    ).json()
    assert ts(patched["next_run_at"]) == datetime(2026, 1, 2, 0, tzinfo=UTC)  # 09:00 JST


def test_patch_without_schedule_keeps_next_run(api: Harness) -> None:
    job = create(api, schedule={"kind": "interval", "seconds": 30})
    api.clock.advance(10)
    patched = api.patch(f"/jobs/{job['id']}", json={"max_retries": 2}).json()
    assert patched["next_run_at"] == job["next_run_at"]
    assert patched["max_retries"] == 2


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        ({"schedule": {"kind": "cron", "expr": "0 0 25 * * *"}}, "schedule*.expr"),
        ({"schedule": {"kind": "interval", "seconds": 0}}, "schedule*.seconds"),
        ({"schedule": {"kind": "once", "at": "2025-06-01T00:00:00Z"}}, "schedule*.at"),
        ({"handler": "nope"}, "handler"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": 3601}, "timeout"),
        ({"timeout": None}, "timeout"),
        ({"max_retries": 26}, "max_retries"),
        ({"payload": [1]}, "payload"),
        ({"payload": {"k": "v" * 300}}, "payload"),
        ({"bogus": 1}, "bogus"),
        ({"name": "has space"}, "name"),
    ],
)
def test_patch_rejects_bad_values_and_changes_nothing(api: Harness, change: dict[str, Any], pattern: str) -> None:
    job = create(api)
    data = assert_error(api.patch(f"/jobs/{job['id']}", json=change), 422)
    assert_names_field(data, pattern)
    assert api.get(f"/jobs/{job['id']}").json() == job


def test_patch_to_a_taken_name_is_409(api: Harness) -> None:
    create(api, name="first")
    second = create(api, name="second")
    data = assert_error(api.patch(f"/jobs/{second['id']}", json={"name": "first"}), 409, "duplicate_name")
    assert "first" in data["message"]
    assert api.get(f"/jobs/{second['id']}").json() == second


# -- delete -----------------------------------------------------------------------------------------------


def test_delete_then_404(api: Harness) -> None:
    job = create(api)
    response = api.delete(f"/jobs/{job['id']}")
    assert response.status_code == 204
    assert response.content == b""
    assert_error(api.get(f"/jobs/{job['id']}"), 404, "not_found")
    assert_error(api.delete(f"/jobs/{job['id']}"), 404, "not_found")
    assert api.get("/jobs").json()["items"] == []


def test_delete_frees_the_name(api: Harness) -> None:
    job = create(api, name="reuse")
    assert api.delete(f"/jobs/{job['id']}").status_code == 204
    assert create(api, name="reuse")["id"] != job["id"]


# -- pause / resume / trigger -----------------------------------------------------------------------------


def test_pause_and_resume(api: Harness) -> None:
    job = create(api, schedule={"kind": "interval", "seconds": 30})
    response = api.post(f"/jobs/{job['id']}/pause")
    assert response.status_code == 200
    paused = response.json()
    assert paused["enabled"] is False
    assert api.get(f"/jobs/{job['id']}").json()["enabled"] is False
    api.clock.advance(1000)
    response = api.post(f"/jobs/{job['id']}/resume")
    assert response.status_code == 200
    resumed = response.json()
    assert resumed["enabled"] is True
    # fires missed while paused are not run: the schedule restarts from now
    assert ts(resumed["next_run_at"]) == START + timedelta(seconds=1030)


def test_pause_and_resume_are_idempotent(api: Harness) -> None:
    job = create(api)
    first = api.post(f"/jobs/{job['id']}/pause").json()
    second = api.post(f"/jobs/{job['id']}/pause").json()
    assert second == first
    resumed = api.post(f"/jobs/{job['id']}/resume").json()
    assert api.post(f"/jobs/{job['id']}/resume").json() == resumed


def test_trigger_sets_pending_and_keeps_the_schedule(api: Harness) -> None:
    job = create(api)
    api.clock.advance(5)
    response = api.post(f"/jobs/{job['id']}/trigger")
    assert response.status_code == 202, response.text
    triggered = response.json()
    assert ts(triggered["trigger_pending_at"]) == START + timedelta(seconds=5)
    assert triggered["schedule"] == job["schedule"]
    assert triggered["next_run_at"] == job["next_run_at"]
    assert triggered["enabled"] is True
    assert api.get(f"/jobs/{job['id']}").json()["trigger_pending_at"] == triggered["trigger_pending_at"]


def test_trigger_on_a_paused_job_keeps_it_paused(api: Harness) -> None:
    job = create(api, enabled=False)
    triggered = api.post(f"/jobs/{job['id']}/trigger").json()
    assert triggered["enabled"] is False
    assert ts(triggered["trigger_pending_at"]) == START


# -- executions, handlers, health, openapi, metrics -------------------------------------------------------


def test_executions_of_a_job_with_none(api: Harness) -> None:
    job = create(api)
    response = api.get(f"/jobs/{job['id']}/executions")
    assert response.status_code == 200
    assert response.json() == {"items": [], "next": None}


def test_handlers(api: Harness) -> None:
    response = api.get("/handlers")
    assert response.status_code == 200
    handlers = {h["name"]: h for h in response.json()}
    assert set(handlers) == {"noop", "http.check"}  # the built-in plug-in's (and no product's: tests_parts)
    assert handlers["noop"]["is_async"] is False
    assert handlers["http.check"]["is_async"] is True
    assert handlers["noop"]["description"]


def test_health(api: Harness) -> None:
    response = api.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "store": "ok", "store_error": None, "checks": [], "version": __version__}


def test_openapi_lists_the_routes(api: Harness) -> None:
    response = api.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert "openapi" in document
    paths = document["paths"]
    assert "/jobs" in paths
    assert {"get", "post"} <= set(paths["/jobs"])
    assert "/jobs/{job_id}" in paths
    assert {"get", "patch", "delete"} <= set(paths["/jobs/{job_id}"])
    assert "/jobs/{job_id}/trigger" in paths


def test_metrics(api: Harness) -> None:
    response = api.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert "# TYPE ticklock_executions_total counter" in text
    assert "ticklock_handler_threads_abandoned" in text
    assert "ticklock_queue_depth" in text


def test_unknown_route_is_a_json_404(api: Harness) -> None:
    assert_error(api.get("/nowhere"), 404, "not_found")


# -- bad input: every rejected create names its field and stores nothing ----------------------------------


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


BAD_CREATES: list[tuple[str, dict[str, Any], str, str | None]] = [
    ("cron-second", {"schedule": {"kind": "cron", "expr": "61 0 * * * *"}}, "schedule*.expr", "second"),
    ("cron-minute", {"schedule": {"kind": "cron", "expr": "0 60 * * * *"}}, "schedule*.expr", "minute"),
    ("cron-hour", {"schedule": {"kind": "cron", "expr": "0 0 24 * * *"}}, "schedule*.expr", "hour"),
    ("cron-dom", {"schedule": {"kind": "cron", "expr": "0 0 0 32 * *"}}, "schedule*.expr", "day-of-month"),
    ("cron-month", {"schedule": {"kind": "cron", "expr": "0 0 0 * 13 *"}}, "schedule*.expr", "month"),
    ("cron-dow", {"schedule": {"kind": "cron", "expr": "0 0 0 * * 9"}}, "schedule*.expr", "day-of-week"),
    ("cron-count", {"schedule": {"kind": "cron", "expr": "* * * * *"}}, "schedule*.expr", "6 fields"),
    ("cron-never", {"schedule": {"kind": "cron", "expr": "0 0 0 30 2 *"}}, "schedule*.expr", "never"),
    ("cron-random", {"schedule": {"kind": "cron", "expr": "R R * * * *"}}, "schedule*.expr", "random"),
    ("cron-hashed", {"schedule": {"kind": "cron", "expr": "H 0 * * * *"}}, "schedule*.expr", "hashed"),
    ("once-overflow", {"schedule": {"kind": "once", "at": "9999-12-31T23:59:59-01:00"}}, "schedule*.at", "range"),
    ("payload-deep", {"payload": _deep(40)}, "payload*", "nested"),
    ("payload-bigint", {"payload": {"n": 2**64}}, "payload.n", "64 bits"),
    ("payload-nul-key", {"payload": {"a\x00b": 1}}, "payload*", "NUL"),
    ("cron-descriptor", {"schedule": {"kind": "cron", "expr": "@often"}}, "schedule*.expr", "@often"),
    (
        "timezone",
        {"schedule": {"kind": "cron", "expr": "@daily", "timezone": "Mars/Olympus"}},
        "schedule*.timezone",
        "Mars/Olympus",
    ),
    ("schedule-kind", {"schedule": {"kind": "weekly"}}, "schedule*", None),
    ("schedule-missing", {"schedule": DROP}, "schedule", None),
    ("interval-0", {"schedule": {"kind": "interval", "seconds": 0}}, "schedule*.seconds", None),
    ("interval-1.5", {"schedule": {"kind": "interval", "seconds": 1.5}}, "schedule*.seconds", None),
    ("interval-str", {"schedule": {"kind": "interval", "seconds": "5"}}, "schedule*.seconds", None),
    ("interval-bool", {"schedule": {"kind": "interval", "seconds": True}}, "schedule*.seconds", None),
    ("interval-negative", {"schedule": {"kind": "interval", "seconds": -5}}, "schedule*.seconds", None),
    ("once-past", {"schedule": {"kind": "once", "at": "2025-12-31T23:59:59Z"}}, "schedule*.at", "past"),
    ("once-now", {"schedule": {"kind": "once", "at": "2026-01-01T00:00:00Z"}}, "schedule*.at", None),
    ("once-naive", {"schedule": {"kind": "once", "at": "2026-06-01T12:00:00"}}, "schedule*.at", None),
    ("once-garbage", {"schedule": {"kind": "once", "at": "tomorrow"}}, "schedule*.at", None),
    ("handler-unknown", {"handler": "nope"}, "handler", "noop"),
    ("handler-empty", {"handler": ""}, "handler", None),
    ("payload-list", {"payload": [1, 2]}, "payload", None),
    ("payload-string", {"payload": "text"}, "payload", None),
    ("payload-null", {"payload": None}, "payload", None),
    ("payload-too-big", {"payload": {"k": "v" * 300}}, "payload", "256"),
    ("timeout-0", {"timeout": 0}, "timeout", None),
    ("timeout-negative", {"timeout": -1}, "timeout", None),
    ("timeout-over-max", {"timeout": 3601}, "timeout", "3600"),
    ("max_retries-26", {"max_retries": 26}, "max_retries", "25"),
    ("max_retries--1", {"max_retries": -1}, "max_retries", None),
    ("max_retries-float", {"max_retries": 1.5}, "max_retries", None),
    ("max_retries-bool", {"max_retries": True}, "max_retries", None),
    ("extra-field", {"bogus": 1}, "bogus", "not a known field"),
    ("extra-schedule-field", {"schedule": {"kind": "interval", "seconds": 5, "jitter": 1}}, "schedule*.jitter", None),
    ("name-missing", {"name": DROP}, "name", None),
    ("name-empty", {"name": ""}, "name", None),
    ("name-space", {"name": "has space"}, "name", None),
    ("name-too-long", {"name": "x" * 201}, "name", None),
    ("enabled-str", {"enabled": "maybe"}, "enabled", None),
]


@pytest.mark.parametrize(("change", "pattern", "hint"), [c[1:] for c in BAD_CREATES], ids=[c[0] for c in BAD_CREATES])
def test_bad_create_names_the_field_and_stores_nothing(
    api: Harness, change: dict[str, Any], pattern: str, hint: str | None
) -> None:
    create(api, name="existing")
    before = api.stored()
    data = assert_error(api.post("/jobs", json=body(**{"name": "new-job", **change})), 422)
    assert_names_field(data, pattern)
    if hint is not None:
        assert hint in data["message"], data
    assert api.stored() == before


def test_unknown_handler_lists_registered_ones(api: Harness) -> None:
    data = assert_error(api.post("/jobs", json=body(handler="nope")), 422)
    assert "nope" in data["message"]
    assert "noop" in data["message"]
    assert "http.check" in data["message"]
    assert api.stored() == []


def test_timeout_must_be_a_number_not_a_boolean(api: Harness) -> None:
    """``"timeout": true`` is not a timeout; max_retries and interval seconds already refuse booleans."""
    data = assert_error(api.post("/jobs", json=body(timeout=True)), 422)
    assert_names_field(data, "timeout")
    assert api.stored() == []


def test_duplicate_name_is_409_and_keeps_the_first(api: Harness) -> None:
    first = create(api, name="dup")
    before = api.stored()
    data = assert_error(api.post("/jobs", json=body(name="dup", handler="http.check")), 409, "duplicate_name")
    assert "dup" in data["message"]
    assert api.stored() == before
    assert api.get(f"/jobs/{first['id']}").json() == first


def test_malformed_json_is_400(api: Harness) -> None:
    create(api, name="existing")
    before = api.stored()
    response = api.post("/jobs", content=b'{"name": "x", ', headers={"Content-Type": "application/json"})
    data = assert_error(response, 400, "malformed_json")
    assert data["details"][0]["field"] == "body"
    assert api.stored() == before


def test_form_body_is_415(api: Harness) -> None:
    before = api.stored()
    response = api.post("/jobs", data={"name": "x", "handler": "noop"})
    data = assert_error(response, 415, "unsupported_media_type")
    assert "application/json" in data["message"]
    assert api.stored() == before


def test_body_without_content_type_is_415(api: Harness) -> None:
    response = api.post("/jobs", content=b'{"name": "x"}')
    assert_error(response, 415, "unsupported_media_type")
    assert api.stored() == []


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml"])
def test_json_body_with_a_non_json_content_type_is_415_not_500(api: Harness, content_type: str) -> None:
    response = api.post("/jobs", content=json.dumps(body()).encode(), headers={"Content-Type": content_type})
    data = assert_error(response, 415, "unsupported_media_type")
    assert "application/json" in data["message"]
    assert api.stored() == []


def test_json_content_type_with_charset_is_accepted(api: Harness) -> None:
    response = api.post(
        "/jobs", content=json.dumps(body()).encode(), headers={"Content-Type": "application/json; charset=utf-8"}
    )
    assert response.status_code == 201


def test_body_over_the_limit_is_413(api: Harness) -> None:
    create(api, name="existing")
    before = api.stored()
    data = assert_error(api.post("/jobs", json=body(payload={"k": "v" * 5000})), 413, "too_large")
    assert "4096" in data["message"]
    assert api.stored() == before


def test_streamed_body_over_the_limit_is_413(api: Harness) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"name": "big", "handler": "noop", "schedule": {"kind": "interval", "seconds": 5}, "payload": {"k": "'
        for _ in range(50):
            yield b"v" * 100
        yield b'"}}'

    response = api.post("/jobs", content=chunks(), headers={"Content-Type": "application/json"})
    assert "content-length" not in {k.lower() for k in response.request.headers}
    assert_error(response, 413, "too_large")
    assert api.stored() == []


def test_body_just_under_the_limit_reaches_validation(api_factory: Callable[..., Harness]) -> None:
    api = api_factory(max_body_bytes=4096, max_payload_bytes=8192)
    payload = {"k": "v" * 3800}
    assert len(json.dumps(body(payload=payload)).encode()) < 4096
    assert api.post("/jobs", json=body(payload=payload)).status_code == 201


def test_payload_cap_follows_the_limits(api_factory: Callable[..., Harness]) -> None:
    api = api_factory(max_payload_bytes=32, max_body_bytes=4096)
    assert api.post("/jobs", json=body(name="small", payload={"k": "v" * 10})).status_code == 201
    data = assert_error(api.post("/jobs", json=body(name="large", payload={"k": "v" * 40})), 422)
    assert_names_field(data, "payload")
    assert [name for _, name, _ in api.stored()] == ["small"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/jobs/{id}"),
        ("PATCH", "/jobs/{id}"),
        ("DELETE", "/jobs/{id}"),
        ("POST", "/jobs/{id}/pause"),
        ("POST", "/jobs/{id}/resume"),
        ("POST", "/jobs/{id}/trigger"),
        ("GET", "/jobs/{id}/executions"),
    ],
)
def test_unknown_id_is_404(api: Harness, method: str, path: str) -> None:
    create(api)
    before = api.stored()
    kwargs: dict[str, Any] = {"json": {"timeout": 5}} if method == "PATCH" else {}
    data = assert_error(api.request(method, path.format(id="0" * 32), **kwargs), 404, "not_found")
    assert "0" * 32 in data["message"]
    assert api.stored() == before


# -- auth -------------------------------------------------------------------------------------------------


def test_no_bearer_is_401(secured_api: Harness) -> None:
    response = secured_api.get("/jobs", auth=False)
    assert_error(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    "header", ["Bearer wrong", "Bearer", "Basic czNjcmV0LXRva2Vu", "s3cret-token", "Bearer s3cret-token-and-more"]
)
def test_wrong_bearer_is_401(secured_api: Harness, header: str) -> None:
    assert_error(secured_api.get("/jobs", headers={"Authorization": header}), 401, "unauthorized")


def test_right_bearer_is_200(secured_api: Harness) -> None:
    response = secured_api.get("/jobs", headers={"Authorization": f"Bearer {secured_api.token}"})
    assert response.status_code == 200
    assert response.json() == {"items": [], "next": None}


def test_writes_without_bearer_are_refused_and_store_nothing(secured_api: Harness) -> None:
    assert_error(secured_api.post("/jobs", json=body(), auth=False), 401)
    assert secured_api.stored() == []
    job = create(secured_api)
    assert_error(secured_api.delete(f"/jobs/{job['id']}", auth=False), 401)
    assert_error(secured_api.post(f"/jobs/{job['id']}/trigger", auth=False), 401)
    assert secured_api.get(f"/jobs/{job['id']}").json() == job


def test_health_is_open_with_a_token_set(secured_api: Harness) -> None:
    response = secured_api.get("/health", auth=False)
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_metrics_and_handlers_need_the_token(secured_api: Harness) -> None:
    assert_error(secured_api.get("/handlers", auth=False), 401)
    assert_error(secured_api.get("/metrics", auth=False), 401)
    assert secured_api.get("/handlers").status_code == 200
