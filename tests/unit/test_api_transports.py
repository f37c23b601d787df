"""The two translations around ``Api.handle`` (API Gateway events, and the flood filter of the local server),
and ``Api`` called from many threads at once: it keeps no request state between calls."""

from __future__ import annotations

import base64
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ticklock.adapters.store.sqlite import SQLiteStore
from ticklock.api.app import Api
from ticklock.api.gateway import handle_event, request_of
from ticklock.api.http import Reply, Request
from ticklock.api.routes import ApiDeps
from ticklock.api.server import OncePerMinute
from ticklock.clock import SystemClock
from ticklock.domain.service import JobService
from ticklock.handlers.contract import Registry
from ticklock.runtimes.plugins import register_all

EVENTS = Path(__file__).resolve().parents[2] / "events"


def api_on(tmp_path: Path, token: str | None = None) -> Api:
    service = JobService(SQLiteStore(tmp_path / "t.db"), register_all(Registry()), SystemClock())
    return Api(ApiDeps(service), api_token=token, max_body_bytes=4096)


def event(method: str, path: str, body: bytes | None = None, *, b64: bool = False, **headers: str) -> dict[str, Any]:
    sample: dict[str, Any] = json.loads((EVENTS / "api-list-jobs.json").read_text())
    sample.update(httpMethod=method, path=path, queryStringParameters=None, multiValueQueryStringParameters=None)
    sample["headers"] = {**sample["headers"], **headers}
    sample["multiValueHeaders"] = {k: [v] for k, v in sample["headers"].items()}
    if body is None:
        sample["body"] = None
    elif b64:
        sample["body"], sample["isBase64Encoded"] = base64.b64encode(body).decode(), True
    else:
        sample["body"], sample["isBase64Encoded"] = body.decode(), False
    return sample


def test_the_sample_events_are_answered(tmp_path: Path) -> None:
    api = api_on(tmp_path)
    created = handle_event(api, json.loads((EVENTS / "api-create-job.json").read_text()))
    assert created["statusCode"] == 201, created
    listed = handle_event(api, json.loads((EVENTS / "api-list-jobs.json").read_text()))
    assert listed["statusCode"] == 200
    assert [j["id"] for j in json.loads(listed["body"])["items"]] == [json.loads(created["body"])["id"]]


def test_a_base64_body_is_decoded_and_bad_base64_is_400(tmp_path: Path) -> None:
    api = api_on(tmp_path)
    job = {"name": "b64", "handler": "noop", "schedule": {"kind": "interval", "seconds": 5}}
    ok = handle_event(
        api, event("POST", "/jobs", json.dumps(job).encode(), b64=True, **{"Content-Type": "application/json"})
    )
    assert ok["statusCode"] == 201, ok
    bad = event("POST", "/jobs", b"x")
    bad["headers"]["Content-Type"] = "application/json"
    bad.update(body="%%%not base64", isBase64Encoded=True)
    answer = handle_event(api, bad)
    assert answer["statusCode"] == 400
    assert json.loads(answer["body"])["error"] == "bad_request"


def test_headers_are_case_insensitive_and_the_token_is_checked_first(tmp_path: Path) -> None:
    api = api_on(tmp_path, token="t")
    request = request_of(event("GET", "/jobs", AUTHORIZATION="Bearer t"))
    assert isinstance(request, Request)
    assert request.headers["authorization"] == "Bearer t"
    assert handle_event(api, event("GET", "/jobs", Authorization="Bearer t"))["statusCode"] == 200
    denied = handle_event(api, event("POST", "/jobs", b"{nope", Authorization="Bearer x"))
    assert denied["statusCode"] == 401
    assert denied["headers"]["www-authenticate"] == "Bearer"


def test_many_threads_share_one_api_without_mixing_requests(tmp_path: Path) -> None:
    """powertools kept the request in a class attribute; this is the property that broke."""
    api = api_on(tmp_path)

    def create_then_get(i: int) -> tuple[int, bool]:
        job = {"name": f"t{i}", "handler": "noop", "schedule": {"kind": "interval", "seconds": 60}, "payload": {"i": i}}
        made = api.handle(Request("POST", "/jobs", {"content-type": "application/json"}, {}, json.dumps(job).encode()))
        got = api.handle(Request("GET", f"/jobs/{json.loads(made.body)['id']}"))
        data = json.loads(got.body)
        return made.status, data["name"] == f"t{i}" and data["payload"] == {"i": i}

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(create_then_get, range(400)))
    assert results == [(201, True)] * 400


def test_api_handle_turns_a_bug_into_a_500_with_only_an_incident_id(tmp_path: Path, caplog: Any) -> None:
    api = api_on(tmp_path)
    route = next(r for r in api.routes if r.op == "listHandlers")

    def broken(call: Any) -> Reply:
        raise RuntimeError("secret internals")

    object.__setattr__(route, "call", broken)
    with caplog.at_level(logging.ERROR, logger="ticklock.api"):
        reply = api.handle(Request("GET", "/handlers"))
    assert reply.status == 500
    body = json.loads(reply.body)
    assert body["error"] == "internal" and "secret" not in reply.body.decode()
    incident = body["message"].split()[2].rstrip(";")
    records = [r for r in caplog.records if r.getMessage() == "api.error"]
    assert len(records) == 1
    assert getattr(records[0], "incident", None) == incident


def test_a_flood_of_one_warning_is_logged_once_a_minute_with_a_count() -> None:
    flood = OncePerMinute(every=60.0)
    records = [
        logging.LogRecord("uvicorn.error", logging.WARNING, __file__, 1, "Invalid HTTP request received.", None, None)
        for _ in range(1000)
    ]
    passed = [r for r in records if flood.filter(r)]
    assert len(passed) == 1
    flood._seen = {k: (v[0] - 61, v[1]) for k, v in flood._seen.items()}  # a minute later
    later = logging.LogRecord(
        "uvicorn.error", logging.WARNING, __file__, 1, "Invalid HTTP request received.", None, None
    )
    assert flood.filter(later)
    assert "999 more like it" in later.getMessage()
    info = logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1, "Started", None, None)
    assert all(flood.filter(info) for _ in range(5))
