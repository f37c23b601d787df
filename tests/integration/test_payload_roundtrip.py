"""One payload rule for every store (issue 9): what a create or a patch accepts comes back from GET
byte-for-byte equal, on SQLite and on MongoDB (FerretDB on both its backends); what is refused is a 4xx
naming the field, and the refusal is justified by an oracle written apart from the API's rule: the
value fails strict JSON, fails BSON encoding, or breaks MongoDB's field-name or nesting rules."""

from __future__ import annotations

import json
import math
from typing import Any

import bson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ticklock.api.app import Api
from ticklock.api.http import Request
from ticklock.api.routes import ApiDeps
from ticklock.clock import SystemClock
from ticklock.domain.job_rules import Limits
from ticklock.domain.service import JobService
from ticklock.handlers.contract import Registry
from ticklock.ports import Store
from ticklock.runtimes.plugins import register_all

LIMIT = 65536
HEADERS = {"content-type": "application/json"}
keys = st.text(st.characters(codec="utf-8") | st.sampled_from("$.\x00\ud800"), max_size=8)
leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(codec="utf-8") | st.sampled_from("\x00\ud800\udfff$."), max_size=12)
)
values = st.recursive(
    leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4), max_leaves=25
)
payloads = st.dictionaries(keys, values, max_size=5)


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


def why_not(payload: dict[str, Any]) -> str | None:
    """The oracle: a reason no store can hold ``payload`` unchanged, or None."""
    try:
        json.dumps(payload, allow_nan=False).encode("utf-8")
    except (ValueError, UnicodeEncodeError) as exc:
        return f"strict JSON: {exc}"
    try:
        bson.encode({"payload": payload})
    except (bson.errors.InvalidDocument, OverflowError, UnicodeEncodeError, ValueError) as exc:
        return f"BSON: {exc}"

    def names(value: Any) -> str | None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "" or key.startswith("$") or "." in key:
                    return f"MongoDB field name {key!r}"
                found = names(item)
                if found:
                    return found
        if isinstance(value, list):
            for item in value:
                found = names(item)
                if found:
                    return found
        return None

    found = names(payload)
    if found:
        return found
    if depth(payload) > 33:
        return "nested too deep"
    return None


def same(a: Any, b: Any) -> bool:
    """Equal as JSON values of the same types (1, 1.0 and true differ; -0.0 is not 0.0)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@pytest.fixture
def api(store: Store) -> Api:
    service = JobService(store, register_all(Registry()), SystemClock(), Limits(max_payload_bytes=LIMIT))
    return Api(ApiDeps(service), api_token=None, max_body_bytes=LIMIT + 16 * 1024)


def call(api: Api, method: str, path: str, body: Any = None) -> tuple[int, Any, bytes]:
    raw = b"" if body is None else json.dumps(body, allow_nan=True).encode()  # lone surrogates as \\udxxx
    reply = api.handle(Request(method, path, HEADERS if body is not None else {}, {}, raw))
    return reply.status, json.loads(reply.body) if reply.body else None, reply.body


def payload_bytes(reply_body: bytes) -> bytes:
    """The payload's bytes exactly as the server wrote them."""
    text = reply_body.decode()
    start = text.index('"payload":') + len('"payload":')
    decoder = json.JSONDecoder()
    _, end = decoder.raw_decode(text, start)
    return text[start:end].encode()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(created=payloads, patched=payloads)
def test_a_payload_comes_back_unchanged_or_is_refused_naming_its_field(
    api: Api, created: dict[str, Any], patched: dict[str, Any]
) -> None:
    job = {"name": "p", "handler": "noop", "schedule": {"kind": "interval", "seconds": 3600}, "payload": created}
    status, body, raw = call(api, "POST", "/jobs", job)
    reason = why_not(created)
    if reason is None:
        assert status == 201, (body, created)
    else:
        assert status in (400, 422), (status, body, reason)
        field = body["details"][0]["field"]
        assert field.startswith("payload") or field == "body", body
        return
    job_id = body["id"]
    try:
        assert same(body["payload"], created)
        status, got, got_raw = call(api, "GET", f"/jobs/{job_id}")
        assert status == 200
        assert payload_bytes(got_raw) == payload_bytes(raw)
        assert same(got["payload"], created)

        status, body, raw = call(api, "PATCH", f"/jobs/{job_id}", {"payload": patched})
        reason = why_not(patched)
        if reason is not None:
            assert status in (400, 422), (status, body, reason)
            return
        assert status == 200, (body, patched)
        status, got, got_raw = call(api, "GET", f"/jobs/{job_id}")
        assert payload_bytes(got_raw) == payload_bytes(raw)
        assert same(got["payload"], patched)
    finally:
        assert call(api, "DELETE", f"/jobs/{job_id}")[0] == 204
