"""A job's policy over the API: given at create, shown, changed by PATCH, every field validated."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.conftest import ApiHarness

JOB = {"name": "p", "handler": "noop", "schedule": {"kind": "cron", "expr": "0 * * * * *"}}


def test_a_policy_is_given_shown_and_changed(api: ApiHarness) -> None:
    plain = api.post("/jobs", json=JOB).json()
    assert plain["policy"] == {"catchup_window": None}
    job = api.post("/jobs", json={**JOB, "name": "q", "policy": {"catchup_window": 300}}).json()
    assert job["policy"] == {"catchup_window": 300.0}
    assert api.store.get_job(job["id"]).policy.catchup_window == 300.0
    changed = api.patch(f"/jobs/{job['id']}", json={"policy": {"catchup_window": 60.5}}).json()
    assert changed["policy"] == {"catchup_window": 60.5} and changed["version"] == job["version"] + 1
    reset = api.patch(f"/jobs/{job['id']}", json={"policy": {}}).json()  # the whole policy: defaults
    assert reset["policy"] == {"catchup_window": None}
    assert api.patch(f"/jobs/{job['id']}", json={"policy": {}}).json()["version"] == reset["version"]  # no change


@pytest.mark.parametrize(
    "policy",
    [{"catchup_window": 0}, {"catchup_window": 30 * 86400 + 1}, {"catchup_window": "5"}, {"jitter": 1}, "fast", None],
)
def test_a_bad_policy_is_refused_naming_the_field(api: ApiHarness, policy: Any) -> None:
    response = api.post("/jobs", json={**JOB, "policy": policy})
    assert response.status_code == 422, response.text
    assert response.json()["details"][0]["field"].startswith("policy")
