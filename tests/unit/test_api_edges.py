"""The API's edges, in process (the ASGI front on a real SQLite store): what a careless or hostile client
sends, and what the OpenAPI document promises. Each case was seen to fail on the powertools resolver
(issue 9); the server-level ones (sockets, concurrency, descriptors) are in tests/e2e/test_api_server.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ticklock.api.http import MAX_JSON_DEPTH, BadJson, _depth, read_json

Harness = Any
JOB = {"name": "edge", "handler": "noop", "schedule": {"kind": "interval", "seconds": 60}}
JSON = {"Content-Type": "application/json"}


def raw_post(api: Harness, body: bytes, *, auth: bool = True, headers: dict[str, str] | None = None) -> Any:
    return api.post("/jobs", content=body, headers={**JSON, **(headers or {})}, auth=auth)


def error_of(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    data: dict[str, Any] = response.json()
    assert set(data) == {"error", "message", "details"}, data
    if code:
        assert data["error"] == code, data
    return data


BAD_BODIES = {
    "invalid-utf8": b'{"a":"\xff"}',
    "nested-10000": b'{"a":' + b"[" * 10_000 + b"]" * 10_000 + b"}",
    "int-5000-digits": b'{"a":' + b"7" * 5000 + b"}",
    "nan": b'{"name":"x","handler":"noop","schedule":{"kind":"interval","seconds":1},"payload":{"v":NaN}}',
    "infinity": b'{"payload":{"v":-Infinity}}',
    "float-overflow": b'{"payload":{"v":1e400}}',
    "duplicate-key": b'{"name":"a","name":"b"}',
    "truncated": b'{"name":',
    "not-json": b"name=x",
}


# -- finding 3: malformed bytes are 400s with the error body, never 500s ----------------------------------


@pytest.mark.parametrize("body", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_malformed_body_is_400(api_factory: Any, body: bytes) -> None:
    api = api_factory(max_body_bytes=65536)
    data = error_of(raw_post(api, body), 400, "malformed_json")
    assert data["details"][0]["field"] == "body"
    assert api.stored() == []


def test_header_with_non_utf8_bytes_is_not_a_500(api: Harness) -> None:
    response = api.get("/handlers", headers={"X-Odd": b"\xff\xfe"})
    assert response.status_code == 200


def test_authorization_with_non_utf8_bytes_is_401(secured_api: Harness) -> None:
    response = secured_api.get("/jobs", headers={"Authorization": b"Bearer \xff\xfe"})
    error_of(response, 401, "unauthorized")


def test_query_that_is_not_utf8_is_400(api: Harness) -> None:
    error_of(api.get("/jobs?handler=%ff"), 400, "bad_query")


def test_read_json_depth_limit_counts_outside_strings() -> None:
    deep = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    with pytest.raises(BadJson, match="nested"):
        read_json(deep.encode())
    # brackets inside a string are text, not nesting
    assert read_json(json.dumps({"s": "[" * 500}).encode()) == {"s": "[" * 500}


def depth_by_hand(text: str) -> int:
    """The oracle: one character at a time, a string's escapes followed by hand."""
    deepest = level = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            level += 1
            deepest = max(deepest, level)
        elif char in "]}":
            level -= 1
    return deepest


PIECES = ["[", "]", "{", "}", '"', "a", ",", "[[[[", "]]", "é", "\n", '"["', '"]"', "{[", "}]"]
ESCAPES = ["\\", '\\"', "\\\\", "\\["]


@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(PIECES + ESCAPES), max_size=400), st.booleans())
def test_depth_agrees_with_a_scan_one_character_at_a_time(pieces: list[str], plain: bool) -> None:
    """Both ways of the scan, a body without a backslash and one with, against the oracle."""
    if plain:
        pieces = [piece for piece in pieces if "\\" not in piece]
    text = "[" * (MAX_JSON_DEPTH + 1) + "".join(pieces)  # past the shortcut, so the scan runs
    assert _depth(text.encode()) == depth_by_hand(text)


# -- finding 4: authentication before parsing ----------------------------------------------------------


@pytest.mark.parametrize("body", [*BAD_BODIES.values(), json.dumps(JOB).encode()], ids=[*BAD_BODIES, "valid"])
def test_without_a_token_every_body_gets_401(api_factory: Any, body: bytes) -> None:
    secured_api = api_factory(token="t0ken", max_body_bytes=65536)
    data = error_of(raw_post(secured_api, body, auth=False), 401, "unauthorized")
    assert "details" in data and data["details"] == []
    assert secured_api.stored() == []


@pytest.mark.parametrize("path", ["/nope", "/jobs/x/y/z", "/openapi.json", "/swagger", "/metrics"])
def test_without_a_token_unknown_and_hidden_paths_are_401(secured_api: Harness, path: str) -> None:
    error_of(secured_api.get(path, auth=False), 401)
    error_of(secured_api.request("PUT", path, auth=False), 401)


def test_without_a_token_a_wrong_content_type_is_401(secured_api: Harness) -> None:
    error_of(secured_api.post("/jobs", content=b"x", headers={"Content-Type": "text/plain"}, auth=False), 401)


# -- finding 5 (the store side is tests/integration/test_payload_roundtrip.py) ------------------------------


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"$where": 1}, "payload.$where"),
        ({"a.b": 1}, "payload.a.b"),
        ({"ok": {"$set": 1}}, "payload.ok.$set"),
        ({"": 1}, "payload."),
        ({"s": "\ud800"}, "payload.s"),
        ({"\udfff": 1}, "payload"),
        ({"n": [1, 2**63]}, "payload.n[1]"),
    ],
    ids=["dollar", "dot", "nested-dollar", "empty-key", "lone-surrogate", "surrogate-key", "int-over-64-bits"],
)
def test_payload_outside_the_store_rule_is_422_naming_the_field(api: Harness, payload: Any, field: str) -> None:
    body = json.dumps({**JOB, "payload": payload}).encode()  # json.dumps writes lone surrogates as \\ud800
    data = error_of(raw_post(api, body), 422, "invalid_job")
    assert data["details"][0]["field"] == field, data
    assert api.stored() == []


# -- finding 8: /health says ok / unavailable to anyone, more only with the token ---------------------------


def test_health_without_token_says_only_ok(secured_api: Harness) -> None:
    response = secured_api.get("/health", auth=False)
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_health_with_token_gives_details(secured_api: Harness) -> None:
    data = secured_api.get("/health").json()
    assert data["status"] == "ok"
    assert data["store"] == "ok"
    assert "version" in data


def test_health_when_the_store_is_gone_says_unavailable_and_nothing_else(secured_api: Harness) -> None:
    secured_api.store.close()
    response = secured_api.get("/health", auth=False)
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable"}
    detailed = secured_api.get("/health")
    assert detailed.status_code == 503
    assert detailed.json()["store"] == "unavailable"
    assert detailed.json()["store_error"]


# -- finding 9: the HTTP semantics the document and the README promise ---------------------------------------


def test_wrong_method_is_405_with_allow(api: Harness) -> None:
    response = api.request("PUT", "/jobs")
    error_of(response, 405, "method_not_allowed")
    assert response.headers["allow"] == "GET, HEAD, OPTIONS, POST"
    job = api.post("/jobs", json=JOB).json()
    response = api.request("POST", f"/jobs/{job['id']}")
    error_of(response, 405)
    assert response.headers["allow"] == "DELETE, GET, HEAD, OPTIONS, PATCH"


def test_head_where_get_is(api: Harness) -> None:
    get = api.get("/health")
    head = api.request("HEAD", "/health")
    assert head.status_code == 200
    assert head.content == b""
    assert head.headers["content-length"] == str(len(get.content))


def test_options_lists_the_methods(api: Harness) -> None:
    response = api.request("OPTIONS", "/jobs")
    assert response.status_code == 204
    assert response.headers["allow"] == "GET, HEAD, OPTIONS, POST"


def test_body_without_content_type_is_415(api: Harness) -> None:
    error_of(api.post("/jobs", content=json.dumps(JOB).encode()), 415, "unsupported_media_type")
    assert api.stored() == []


@pytest.mark.parametrize(
    "kind", ["application/json", "application/merge-patch+json", "application/json; charset=utf-8"]
)
def test_json_media_types_are_accepted(api: Harness, kind: str) -> None:
    response = api.post("/jobs", content=json.dumps(JOB).encode(), headers={"Content-Type": kind})
    assert response.status_code == 201, response.text


def test_other_charsets_are_415(api: Harness) -> None:
    response = api.post(
        "/jobs", content=json.dumps(JOB).encode(), headers={"Content-Type": "application/json; charset=latin-1"}
    )
    error_of(response, 415)


def test_unknown_and_repeated_query_parameters_are_422(api: Harness) -> None:
    assert error_of(api.get("/jobs?colour=red"), 422)["details"][0]["field"] == "query.colour"
    assert error_of(api.get("/jobs?limit=1&limit=2"), 422)["details"][0]["field"] == "query.limit"
    assert error_of(api.get("/jobs?limit=0"), 422)["details"][0]["field"] == "query.limit"
    assert error_of(api.get("/handlers?x=1"), 422)["details"][0]["field"] == "query.x"


def test_a_body_where_none_is_taken_is_422(api: Harness) -> None:
    job = api.post("/jobs", json=JOB).json()
    error_of(api.post(f"/jobs/{job['id']}/pause", json={"why": "x"}), 422)


def test_openapi_declares_every_status_with_the_error_schema(secured_api: Harness) -> None:
    doc = secured_api.get("/openapi.json").json()
    error_ref = "#/components/schemas/ErrorBody"
    assert set(doc["components"]["schemas"]["ErrorBody"]["properties"]) == {"error", "message", "details"}
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            statuses = set(op["responses"])
            assert {"400", "422", "500", "503"} <= statuses, (method, path, statuses)
            for status, response in op["responses"].items():
                if status.startswith(("4", "5")) and path != "/health":
                    assert response["content"]["application/json"]["schema"] == {"$ref": error_ref}, (path, status)
            if path == "/health":
                assert op["security"] == []
                assert "401" not in statuses
            else:
                assert op["security"] == [{"bearer": []}]
                assert "401" in statuses
    assert {"404", "409", "413", "415"} <= set(doc["paths"]["/jobs/{job_id}"]["patch"]["responses"])
    assert "204" in doc["paths"]["/jobs/{job_id}"]["delete"]["responses"]


def test_openapi_without_a_token_declares_no_security(api: Harness) -> None:
    doc = api.get("/openapi.json").json()
    assert "securitySchemes" not in doc["components"]
    assert all("401" not in op["responses"] for ops in doc["paths"].values() for op in ops.values())


def test_openapi_patch_fields_are_not_nullable(api: Harness) -> None:
    doc = api.get("/openapi.json").json()
    patch = doc["components"]["schemas"]["JobPatch"]
    text = json.dumps(patch)
    assert '"null"' not in text
    assert "default" not in json.dumps(patch["properties"])
    assert patch.get("required", []) == []
    create = doc["components"]["schemas"]["JobCreate"]
    assert set(create["properties"]["handler"]["enum"]) == set(api.registry.names())


# -- finding 11: loose inputs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"enabled": "yes"}, "enabled"),
        ({"enabled": 1}, "enabled"),
        ({"schedule": {"kind": "once", "at": 1893456000}}, "schedule.once.at"),
        ({"schedule": {"kind": "once", "at": "2030-01-01"}}, "schedule.once.at"),
        ({"schedule": {"kind": "once", "at": "2030-01-01T00:00:00"}}, "schedule.once.at"),
        ({"schedule": {"kind": "cron", "expr": "@hourly", "timezone": "localtime"}}, "schedule.cron.timezone"),
        ({"schedule": {"kind": "cron", "expr": "@hourly", "timezone": "posixrules"}}, "schedule.cron.timezone"),
        ({"timeout": 1e-300}, "timeout"),
        ({"timeout": 0.001}, "timeout"),
    ],
    ids=["enabled-yes", "enabled-1", "once-unix", "once-date", "once-local", "tz-localtime", "tz-posixrules",
         "timeout-tiny", "timeout-1ms"],
)  # fmt: skip
def test_loose_inputs_are_422(api: Harness, change: dict[str, Any], field: str) -> None:
    data = error_of(api.post("/jobs", json={**JOB, **change}), 422)
    assert data["details"][0]["field"] == field, data
    assert api.stored() == []


def test_empty_patch_changes_nothing(api: Harness) -> None:
    job = api.post("/jobs", json=JOB).json()
    for patch in ({}, {"name": job["name"]}, {"timeout": job["timeout"], "enabled": True}):
        response = api.patch(f"/jobs/{job['id']}", json=patch)
        assert response.status_code == 200, response.text
        assert response.json()["version"] == job["version"]
        assert response.json()["updated_at"] == job["updated_at"]
    changed = api.patch(f"/jobs/{job['id']}", json={"payload": {"v": 1}}).json()
    assert changed["version"] == job["version"] + 1


def test_patch_payload_one_and_one_point_zero_differ(api: Harness) -> None:
    job = api.post("/jobs", json={**JOB, "payload": {"v": 1}}).json()
    changed = api.patch(f"/jobs/{job['id']}", json={"payload": {"v": 1.0}}).json()
    assert changed["version"] == job["version"] + 1
    assert json.dumps(api.get(f"/jobs/{job['id']}").json()["payload"]) == '{"v": 1.0}'


def test_patch_null_is_422(api: Harness) -> None:
    job = api.post("/jobs", json=JOB).json()
    data = error_of(api.patch(f"/jobs/{job['id']}", json={"timeout": None}), 422)
    assert data["details"][0]["field"] == "timeout"


def test_404_does_not_echo_a_long_id(api: Harness) -> None:
    long_id = "x" * 250
    data = error_of(api.get(f"/jobs/{long_id}"), 404, "not_found")
    assert len(data["message"]) < 150
    data = error_of(api.get(f"/jobs/{'y' * 5000}"), 404, "not_found")
    assert "y" * 100 not in json.dumps(data)


# -- from a review: what a client without the token can still learn, and stored rows of older rules ---------


@pytest.mark.parametrize(
    ("method", "path", "kwargs"),
    [
        ("GET", "/health?x=1", {}),
        ("GET", "/health", {"content": b"{}", "headers": {"Content-Type": "application/json"}}),
        ("HEAD", "/health?limit=%ff", {}),
    ],
    ids=["query", "body", "head-bad-query"],
)
def test_without_a_token_health_ignores_query_and_body(
    secured_api: Harness, method: str, path: str, kwargs: dict[str, Any]
) -> None:
    response = secured_api.request(method, path, auth=False, **kwargs)
    assert response.status_code == 200
    assert response.content in (b"", b'{"status": "ok"}')


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", "/health"),
        ("OPTIONS", "/health"),
        ("GET", "/jobs?a=%ff"),
        ("GET", "/jobs?" + "&".join(f"k{i}=1" for i in range(50))),
    ],
    ids=["put-health", "options-health", "bad-query", "many-fields"],
)
def test_without_a_token_methods_and_queries_are_401(secured_api: Harness, method: str, path: str) -> None:
    response = secured_api.request(method, path, auth=False)
    error_of(response, 401, "unauthorized")
    assert "allow" not in response.headers


def test_a_stored_job_whose_timezone_a_newer_rule_refuses_still_reads(
    api: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ticklock.domain import zones

    job = api.post("/jobs", json={**JOB, "schedule": {"kind": "cron", "expr": "@hourly", "timezone": "Europe/London"}})
    assert job.status_code == 201
    narrower = frozenset(zones.known_zones() - {"Europe/London"})
    monkeypatch.setattr(zones, "known_zones", lambda: narrower)
    job_id = job.json()["id"]
    assert api.get(f"/jobs/{job_id}").status_code == 200
    assert [j["id"] for j in api.get("/jobs").json()["items"]] == [job_id]
    patched = api.patch(f"/jobs/{job_id}", json={"max_retries": 2})
    assert patched.status_code == 200, patched.text
    refused = api.post(
        "/jobs",
        json={**JOB, "name": "new", "schedule": {"kind": "cron", "expr": "@hourly", "timezone": "Europe/London"}},
    )
    error_of(refused, 422)


def test_payload_size_is_counted_in_utf8(api: Harness) -> None:
    # 100 x "é" is 200 bytes as UTF-8 (the harness allows 256), 600 as ASCII escapes
    response = api.post("/jobs", json={**JOB, "payload": {"s": "é" * 100}})
    assert response.status_code == 201, response.text
    data = error_of(api.post("/jobs", json={**JOB, "name": "big", "payload": {"s": "é" * 130}}), 422)
    assert data["message"].startswith("payload: is 2"), data


def test_whole_numbers_may_be_written_as_floats(api: Harness) -> None:
    response = api.post("/jobs", json={**JOB, "schedule": {"kind": "interval", "seconds": 5.0}, "max_retries": 1.0})
    assert response.status_code == 201, response.text
    assert response.json()["schedule"]["seconds"] == 5
    error_of(api.post("/jobs", json={**JOB, "name": "x", "schedule": {"kind": "interval", "seconds": 5.5}}), 422)
    error_of(api.post("/jobs", json={**JOB, "name": "y", "max_retries": True}), 422)


def test_health_callers_share_one_ping_of_a_hung_store(tmp_path: Any) -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from ticklock.adapters.store.sqlite import SQLiteStore
    from ticklock.api.probes import Probe

    release = threading.Event()
    pings: list[int] = []

    class Hung(SQLiteStore):
        def ping(self) -> None:  # the real store, made to hang: fault injection, not a fake
            pings.append(1)
            release.wait(30)

    store = Hung(tmp_path / "hung.db")
    probe = Probe(store, timeout=0.2, fresh_for=60)
    try:
        with ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(lambda _: probe(), range(6)))
        assert answers == ["the store did not answer within 0.2 s"] * 6
        assert len(pings) == 1  # one ping out at a time, however many ask
        assert probe() is not None and len(pings) == 1  # still hung: no second ping piles up
        release.set()
        probe._pending.result(5)  # type: ignore[union-attr]
        assert probe() is None  # the answer of the ping that finished, reused while it is fresh
        assert len(pings) == 1
    finally:
        release.set()
        probe.close()
        store.close()


def test_the_reason_ticklock_disabled_a_job_is_shown_and_cleared_on_resume(api: Harness) -> None:
    made = api.post("/jobs", json=JOB).json()
    assert made["disabled_reason"] is None
    job = api.store.get_job(made["id"])
    reason = "its schedule found no next fire after 2026-01-01T00:00:00+00:00: no valid fire time"
    api.store.update_job(job.with_changes(enabled=False, disabled_reason=reason), expected_version=job.version)
    shown = api.get(f"/jobs/{made['id']}").json()
    assert (shown["enabled"], shown["disabled_reason"]) == (False, reason)
    resumed = api.post(f"/jobs/{made['id']}/resume").json()
    assert (resumed["enabled"], resumed["disabled_reason"]) == (True, None)
