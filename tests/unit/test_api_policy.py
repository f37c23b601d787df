"""A job's policy over the API: given at create, shown, changed by PATCH, every field validated."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.conftest import ApiHarness

JOB = {"name": "p", "handler": "noop", "schedule": {"kind": "cron", "expr": "0 * * * * *"}}
DEFAULT = {"catchup_window": None, "overlap": "skip", "max_jitter": 0.0}


def test_a_policy_is_given_shown_and_changed(api: ApiHarness) -> None:
    plain = api.post("/jobs", json=JOB).json()
    assert plain["policy"] == DEFAULT
    job = api.post("/jobs", json={**JOB, "name": "q", "policy": {"catchup_window": 300}}).json()
    assert job["policy"] == {**DEFAULT, "catchup_window": 300.0}
    assert api.store.get_job(job["id"]).policy.catchup_window == 300.0
    changed = api.patch(f"/jobs/{job['id']}", json={"policy": {"catchup_window": 60.5}}).json()
    assert changed["policy"] == {**DEFAULT, "catchup_window": 60.5} and changed["version"] == job["version"] + 1
    every = {"catchup_window": 120, "overlap": "buffer_all", "max_jitter": 12.5}
    changed = api.patch(f"/jobs/{job['id']}", json={"policy": every}).json()
    assert changed["policy"] == {**every, "catchup_window": 120.0}
    assert api.store.get_job(job["id"]).policy.overlap == "buffer_all"
    reset = api.patch(f"/jobs/{job['id']}", json={"policy": {}}).json()  # the whole policy: defaults
    assert reset["policy"] == DEFAULT
    assert api.patch(f"/jobs/{job['id']}", json={"policy": {}}).json()["version"] == reset["version"]  # no change


@pytest.mark.parametrize(
    "policy",
    [
        {"catchup_window": 0},
        {"catchup_window": 30 * 86400 + 1},
        {"catchup_window": "5"},
        {"jitter": 1},
        {"overlap": "sometimes"},
        {"overlap": None},
        {"max_jitter": -1},
        {"max_jitter": 3601},
        {"max_jitter": "5"},
        "fast",
        None,
    ],
)
def test_a_bad_policy_is_refused_naming_the_field(api: ApiHarness, policy: Any) -> None:
    response = api.post("/jobs", json={**JOB, "policy": policy})
    assert response.status_code == 422, response.text
    assert response.json()["details"][0]["field"].startswith("policy")


def test_a_jitter_as_long_as_the_gap_between_two_fires_is_refused(api: ApiHarness) -> None:
    response = api.post("/jobs", json={**JOB, "policy": {"max_jitter": 60}})  # it fires every 60 s
    assert response.status_code == 422, response.text
    [detail] = response.json()["details"]
    assert detail["field"] == "policy.max_jitter" and "60 s" in detail["message"]
    job = api.post("/jobs", json={**JOB, "policy": {"max_jitter": 59.5}}).json()
    interval = {"kind": "interval", "seconds": 30}
    response = api.patch(f"/jobs/{job['id']}", json={"schedule": interval})  # 59.5 s no longer fits
    assert response.status_code == 422 and response.json()["details"][0]["field"] == "policy.max_jitter"
    assert api.get(f"/jobs/{job['id']}").json()["schedule"]["kind"] == "cron"  # nothing half-written
