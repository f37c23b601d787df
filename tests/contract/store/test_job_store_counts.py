"""The ``JobStore`` role's counts by state (``count_jobs``) stay exact through every kind of change a job
goes through: created alone or in a batch, edited, paused, held, skipped and resumed through the service,
claimed, run, advanced and finished on the fire path, alerts raised and cleared, deleted, and time passing
a hold's end. After each change the counts are compared with a plain count over the whole listing
(``job_state`` and ``job_conditions`` of every job). Run unchanged on every adapter."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from tests.support.factories import T0, make_execution, make_job, manual_fire
from ticklock.clock import FakeClock
from ticklock.domain.executions import ExecutionStatus
from ticklock.domain.fires import Fire, Trigger
from ticklock.domain.jobs import Hold, HoldKind, Job
from ticklock.domain.schedules import CronSchedule, IntervalSchedule, OnceSchedule, Schedule
from ticklock.domain.service import JobService
from ticklock.domain.states import JOB_FILTERS, job_conditions, job_state
from ticklock.errors import TicklockError
from ticklock.handlers.contract import Registry
from ticklock.ports import JobQuery, Store

STATUSES = [ExecutionStatus.SUCCESS, ExecutionStatus.FAILED, ExecutionStatus.TIMEOUT, ExecutionStatus.LOST]
SLACK = timedelta(seconds=30)


def _listed(store: Store, now: datetime) -> dict[str, int]:
    """The counts, from every job listed and judged one by one."""
    jobs: list[Job] = []
    after: tuple[str, str] | None = None
    while True:
        page = store.find_jobs(JobQuery(sort="id", after=after), limit=100)
        jobs += page
        if len(page) < 100:
            break
        after = (page[-1].id, page[-1].id)
    counts = {"total": len(jobs), **dict.fromkeys(JOB_FILTERS, 0)}
    for job in jobs:
        counts[job_state(job, now).value] += 1
        for condition in job_conditions(job):
            counts[condition.value] += 1
    return counts


def _new_job(rng: random.Random, now: datetime) -> Job:
    """A job in any state: enabled, paused, disabled, done, or held by a hold ahead or already ended."""
    shapes: list[Schedule] = [
        IntervalSchedule(60),
        CronSchedule("0 */5 * * * *"),
        OnceSchedule(now + timedelta(hours=1)),
    ]
    schedule = rng.choice(shapes)
    job = make_job(schedule=schedule, next_run_at=now + timedelta(seconds=rng.randrange(-120, 600)))
    shape = rng.choice(["enabled", "enabled", "paused", "disabled", "done", "held"])
    if shape == "paused":
        job = job.with_changes(enabled=False)
    elif shape == "disabled":
        job = job.with_changes(enabled=False, next_run_at=None, disabled_reason="its schedule found no next fire")
    elif shape == "done":
        job = job.with_changes(enabled=False, next_run_at=None)
    elif shape == "held":
        ends = now + timedelta(seconds=rng.choice([-60, 30, 900]))
        hold = Hold(rng.choice(list(HoldKind)), now - timedelta(hours=1), skipped_from=now, resumes_at=ends)
        job = job.with_changes(hold=hold, next_run_at=ends)
    return job


class Changes:
    """Random changes of the store's jobs, each one kind of write the service or the engine makes."""

    def __init__(self, store: Store, rng: random.Random) -> None:
        self.store, self.rng = store, rng
        self.clock = FakeClock(T0)
        self.service = JobService(store, Registry(), self.clock)

    def _pick(self) -> Job | None:
        jobs = self.store.find_jobs(JobQuery(sort="id"), limit=500)
        return self.rng.choice(jobs) if jobs else None

    def add(self) -> None:
        self.store.add_job(_new_job(self.rng, self.clock.now()))

    def add_batch(self) -> None:
        self.store.add_jobs([_new_job(self.rng, self.clock.now()) for _ in range(self.rng.randrange(1, 5))])

    def edit(self, job: Job) -> None:
        """The columns a state is decided by, changed by ``update_job`` as an edit writes them."""
        shape = _new_job(self.rng, self.clock.now())
        changed = job.with_changes(
            enabled=shape.enabled, next_run_at=shape.next_run_at, disabled_reason=shape.disabled_reason, hold=shape.hold
        )
        self.store.update_job(changed, expected_version=job.version)

    def pause(self, job: Job) -> None:
        self.service.pause(job.id, note=self.rng.choice([None, "by a test"]))

    def hold(self, job: Job) -> None:
        self.service.pause(job.id, until=self.clock.now() + timedelta(seconds=self.rng.choice([90, 400, 3600])))

    def skip(self, job: Job) -> None:
        self.service.skip(job.id, self.rng.randrange(1, 4))

    def resume(self, job: Job) -> None:
        self.service.resume(job.id)

    def fire(self) -> None:
        """Claim what is due, start it, and finish it as the engine would: advanced (to a next fire or to
        none: a one-shot done), finished with its run counted, released, or advanced without a run."""
        now = self.clock.now()
        for job in self.store.claim_due(now=now, horizon=now, limit=3, owner="test", slack=SLACK):
            fire = Fire(job, job.next_run_at or now, Trigger.SCHEDULE, job.lease.token if job.lease else "")
            following = self.rng.choice([None, now + timedelta(minutes=1)])
            way = self.rng.choice(["complete", "complete", "finish", "release", "advance"])
            if way == "release":
                self.store.release(job.id, fire.lease_token)
                continue
            if way == "advance":
                self.store.advance(fire, next_run_at=following, now=now)
                continue
            execution = make_execution(fire)
            self.store.start_execution(execution)
            done = execution.with_changes(
                status=self.rng.choice(STATUSES), finished_at=now + timedelta(seconds=1), attempts=1
            )
            if way == "finish":
                self.store.finish_execution(done)
            else:
                self.store.complete(done, fire, next_run_at=following, now=now)

    def run(self, job: Job) -> None:
        """A manual run, finished: its status becomes the job's last."""
        execution = make_execution(manual_fire(job, self.clock.now()))
        self.store.start_execution(execution)
        self.store.finish_execution(
            execution.with_changes(status=self.rng.choice(STATUSES), finished_at=self.clock.now(), attempts=1)
        )

    def alert(self, job: Job) -> None:
        raised = {"late": {"raised_at": self.clock.now().isoformat(), "detail": "late"}}
        self.store.set_open_alerts(job.id, expected=job.open_alerts, new={} if job.open_alerts else raised)

    def delete(self, job: Job) -> None:
        self.store.delete_job(job.id)

    def wait(self) -> None:
        self.clock.advance(self.rng.choice([10, 60, 300]))

    def one(self) -> str:
        """One random change; returns its name."""
        alone: dict[str, Callable[[], None]] = {"add": self.add, "add_batch": self.add_batch, "fire": self.fire,
                                                "wait": self.wait}  # fmt: skip
        on_a_job: dict[str, Callable[[Job], None]] = {
            "edit": self.edit,
            "pause": self.pause,
            "hold": self.hold,
            "skip": self.skip,
            "resume": self.resume,
            "run": self.run,
            "alert": self.alert,
            "delete": self.delete,
        }
        name = self.rng.choice([*alone, *alone, *on_a_job])  # creations and fires twice as likely
        job = None if name in alone else self._pick()
        try:
            if name in alone:
                alone[name]()
            elif job is not None:
                on_a_job[name](job)
        except TicklockError:  # refused (a one-shot held, a paused job skipped...): nothing changed
            pass
        return name


@pytest.mark.parametrize("seed", [46, 47])
def test_the_counts_stay_exact_through_every_kind_of_change(store: Store, seed: int) -> None:
    changes = Changes(store, random.Random(seed))
    done: list[str] = []
    for _ in range(120):
        done.append(changes.one())
        now = changes.clock.now()
        for at in (now, now + timedelta(minutes=10)):  # some holds ahead now end by then
            assert store.count_jobs(at) == _listed(store, at), (done, at)
    assert {"add", "add_batch", "fire", "pause", "hold", "resume", "alert", "delete"} <= set(done)
