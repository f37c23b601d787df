"""Job.due_at, Fire.of and fire_key."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from tests.support.factories import T0, make_execution, make_job, manual_fire
from ticklock.domain.executions import ExecutionStatus
from ticklock.domain.fires import Fire, Lease, Trigger, fire_key
from ticklock.domain.jobs import Job
from ticklock.domain.schedules import IntervalSchedule

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def job(**changes: Any) -> Job:
    base = Job(
        id="job-1",
        name="one",
        handler="noop",
        schedule=IntervalSchedule(60),
        payload={},
        timeout=30.0,
        max_retries=0,
        enabled=True,
        next_run_at=at(10),
        created_at=NOW,
        updated_at=NOW,
    )
    return base.with_changes(**changes)


def lease(until: datetime, token: str = "tok") -> Lease:
    return Lease(token=token, owner="host:1", until=until)


# -- due_at -----------------------------------------------------------------------------------------------


def test_due_at_is_next_run_when_enabled() -> None:
    assert job().due_at(NOW) == at(10)


def test_due_at_overdue_job_is_due_in_the_past() -> None:
    assert job(next_run_at=at(-30)).due_at(NOW) == at(-30)


def test_due_at_paused_job_is_never_due() -> None:
    assert job(enabled=False).due_at(NOW) is None


def test_due_at_nothing_pending() -> None:
    assert job(next_run_at=None).due_at(NOW) is None


def test_due_at_paused_job_with_trigger_pending_is_due_at_the_trigger() -> None:
    assert job(enabled=False, trigger_at=at(5)).due_at(NOW) == at(5)


def test_due_at_disabled_one_shot_with_trigger() -> None:
    assert job(enabled=False, next_run_at=None, trigger_at=at(-1)).due_at(NOW) == at(-1)


def test_due_at_trigger_before_schedule_wins() -> None:
    assert job(trigger_at=at(3)).due_at(NOW) == at(3)


def test_due_at_schedule_before_trigger_wins() -> None:
    assert job(trigger_at=at(20)).due_at(NOW) == at(10)


def test_due_at_lease_in_force_pushes_due_to_lease_end() -> None:
    assert job(lease=lease(at(100))).due_at(NOW) == at(100)
    assert job(trigger_at=at(-5), lease=lease(at(100))).due_at(NOW) == at(100)


def test_due_at_lease_ending_before_due_changes_nothing() -> None:
    assert job(lease=lease(at(5))).due_at(NOW) == at(10)


def test_due_at_expired_lease_is_ignored() -> None:
    assert job(next_run_at=at(-60), lease=lease(at(-1))).due_at(NOW) == at(-60)


def test_due_at_lease_ending_exactly_now_is_expired() -> None:
    assert job(next_run_at=at(-60), lease=lease(NOW)).due_at(NOW) == at(-60)


def test_due_at_lease_on_a_paused_job_without_trigger_is_not_due() -> None:
    assert job(enabled=False, lease=lease(at(100))).due_at(NOW) is None


# -- Fire.of ----------------------------------------------------------------------------------------------


def test_fire_of_unclaimed_job_is_an_error() -> None:
    with pytest.raises(ValueError, match="claimed"):
        Fire.of(job())


def test_fire_of_schedule() -> None:
    claimed = job(lease=lease(at(90), token="lease-1"))
    fire = Fire.of(claimed)
    assert fire.trigger is Trigger.SCHEDULE
    assert fire.scheduled_at == at(10)
    assert fire.lease_token == "lease-1"
    assert fire.job is claimed


def test_fire_of_manual_trigger_before_schedule() -> None:
    fire = Fire.of(job(trigger_at=at(2), lease=lease(at(90), token="lease-2")))
    assert fire.trigger is Trigger.MANUAL
    assert fire.scheduled_at == at(2)
    assert fire.lease_token == "lease-2"


def test_fire_of_manual_trigger_at_the_same_time_as_schedule_goes_first() -> None:
    fire = Fire.of(job(trigger_at=at(10), lease=lease(at(90))))
    assert fire.trigger is Trigger.MANUAL
    assert fire.scheduled_at == at(10)


def test_fire_of_schedule_before_manual_trigger() -> None:
    fire = Fire.of(job(trigger_at=at(20), lease=lease(at(90))))
    assert fire.trigger is Trigger.SCHEDULE
    assert fire.scheduled_at == at(10)


def test_fire_of_paused_job_with_trigger_is_manual() -> None:
    fire = Fire.of(job(enabled=False, trigger_at=at(20), lease=lease(at(90))))
    assert fire.trigger is Trigger.MANUAL
    assert fire.scheduled_at == at(20)


def test_fire_of_claimed_with_nothing_due_is_an_error() -> None:
    with pytest.raises(ValueError, match="nothing due"):
        Fire.of(job(enabled=False, lease=lease(at(90))))


def test_fire_key_property_matches_function() -> None:
    fire = Fire.of(job(lease=lease(at(90))))
    assert fire.key == fire_key("job-1", Trigger.SCHEDULE, at(10))


# -- fire_key ---------------------------------------------------------------------------------------------


def test_fire_key_is_deterministic() -> None:
    assert fire_key("j", Trigger.SCHEDULE, NOW) == fire_key("j", Trigger.SCHEDULE, NOW)
    assert fire_key("j", Trigger.SCHEDULE, NOW) == fire_key("j", Trigger.SCHEDULE, datetime(2026, 5, 1, 12, tzinfo=UTC))


def test_fire_key_is_the_same_for_one_instant_in_any_timezone() -> None:
    elsewhere = NOW.astimezone(timezone(timedelta(hours=-5)))
    assert fire_key("j", Trigger.MANUAL, NOW) == fire_key("j", Trigger.MANUAL, elsewhere)


def test_fire_key_shape_uses_exact_microseconds() -> None:
    moment = datetime(2026, 5, 1, 12, 0, 0, 123457, tzinfo=UTC)
    micros = int(NOW.timestamp()) * 1_000_000 + 123457
    assert fire_key("job-1", Trigger.SCHEDULE, moment) == f"job-1:schedule:{micros}"


def test_fire_key_distinguishes_job_trigger_and_time() -> None:
    keys = {
        fire_key("j", Trigger.SCHEDULE, NOW),
        fire_key("k", Trigger.SCHEDULE, NOW),
        fire_key("j", Trigger.MANUAL, NOW),
        fire_key("j", Trigger.SCHEDULE, NOW + timedelta(microseconds=1)),
        fire_key("j", Trigger.SCHEDULE, NOW + timedelta(seconds=1)),
    }
    assert len(keys) == 5


def test_fire_key_microsecond_steps_never_collide() -> None:
    keys = [fire_key("j", Trigger.SCHEDULE, NOW + timedelta(microseconds=n)) for n in range(2000)]
    assert len(set(keys)) == len(keys)


# -- execution status -------------------------------------------------------------------------------------


def test_final_statuses() -> None:
    assert not ExecutionStatus.RUNNING.final
    assert not ExecutionStatus.INTERRUPTED.final
    for status in (ExecutionStatus.SUCCESS, ExecutionStatus.FAILED, ExecutionStatus.TIMEOUT, ExecutionStatus.LOST):
        assert status.final


def test_with_changes_copies_the_record_and_refuses_a_field_it_does_not_have() -> None:
    job = make_job("before")
    changed = job.with_changes(name="after", enabled=False)
    assert (changed.name, changed.enabled, job.name, job.enabled) == ("after", False, "before", True)
    assert changed == replace(job, name="after", enabled=False)
    execution = make_execution(manual_fire(job, T0))
    assert execution.with_changes(attempts=3) == replace(execution, attempts=3)
    with pytest.raises(TypeError, match="no field nmae"):
        job.with_changes(nmae="typo")
    with pytest.raises(TypeError, match="no field"):
        execution.with_changes(status_code=1)
