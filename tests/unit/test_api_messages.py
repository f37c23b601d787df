"""The API's refusals a person reads (issue 46, item 9): a bad name is explained in words, not as the
regular expression it fails, and a taken name is a 409 whose details name the field, as a 422's do, so a
form can show it beside Name."""

from __future__ import annotations

from tests.unit.conftest import ApiHarness

JOB = {"name": "taken", "handler": "noop", "schedule": {"kind": "interval", "seconds": 60}}


def test_a_bad_name_is_explained_in_words(api: ApiHarness) -> None:
    refused = api.post("/jobs", json={**JOB, "name": "-starts-badly"})
    assert refused.status_code == 422
    [detail] = refused.json()["details"]
    assert detail["field"] == "name"
    assert detail["message"] == "must start with a letter or a digit, then only letters, digits and _ . : @ / -"
    assert "^" not in refused.json()["message"]
    schema = api.get("/openapi.json").json()["components"]["schemas"]["JobCreate"]["properties"]["name"]
    assert schema["pattern"] == "^[A-Za-z0-9][A-Za-z0-9_.:@/-]*$"  # still in the schema, for clients and fuzzers


def test_a_taken_name_is_a_409_naming_the_field(api: ApiHarness) -> None:
    assert api.post("/jobs", json=JOB).status_code == 201
    taken = api.post("/jobs", json=JOB)
    assert taken.status_code == 409
    assert taken.json()["details"] == [{"field": "name", "message": "a job named 'taken' already exists"}]
    other = api.post("/jobs", json={**JOB, "name": "other"}).json()
    renamed = api.patch(f"/jobs/{other['id']}", json={"name": "taken"})
    assert renamed.status_code == 409 and renamed.json()["details"][0]["field"] == "name"
