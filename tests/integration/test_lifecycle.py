"""The five steps against the real SQLite store: lock, record, run, finalise, advance."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.integration.conftest import Harness
from tests.support.factories import make_execution
from tests.support.recorders import BrokenMetrics, BrokenPublisher, DownLocker
from tests.support.waiting import wait_until
from ticklock.clock import FakeClock
from ticklock.domain.events import STARTED
from ticklock.domain.executions import ExecutionStatus
from ticklock.domain.fire_rules import SkipReason
from ticklock.domain.fires import Trigger
from ticklock.domain.schedules import CronSchedule, IntervalSchedule, OnceSchedule
from ticklock.engine.fire_path import MAX_RESUMES
from ticklock.engine.invoke import Invoker
from ticklock.engine.job_lock import LockFailure
from ticklock.engine.reporting import FireLog
from ticklock.errors import StoreUnavailable


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_success_records_publishes_measures_and_advances(fake: Harness) -> None:
    job = fake.add("noop", schedule=IntervalSchedule(30))
    fire = fake.claim_one()
    outcome = fake.runner().run(fire)
    execution = outcome.execution
    assert execution is not None and outcome.skipped is None
    stored = fake.store.get_execution(execution.id)
    assert stored.status is ExecutionStatus.SUCCESS and stored.attempts == 1
    assert stored.finished_at is not None and stored.duration is not None
    assert fake.publisher.types() == [STARTED, "job.execution.succeeded"]
    assert fake.metrics.finished == [("noop", "success", stored.duration, 1)]
    assert [h for h, _ in fake.metrics.started] == ["noop"]
    after = fake.store.get_job(job.id)
    assert after.lease is None
    assert after.next_run_at == fake.clock.now() + timedelta(seconds=30)


class Deaf:
    """A publisher that drops every event (``publishes`` False), and fails the test if handed one."""

    publishes = False

    def __init__(self) -> None:
        self.handed = 0

    def publish(self, event: Any) -> None:
        self.handed += 1

    def flush(self, timeout: float) -> None:
        return None


def test_a_publisher_that_drops_every_event_is_handed_none_and_the_fire_runs_as_ever(fake: Harness) -> None:
    job = fake.add("noop", schedule=IntervalSchedule(30))
    deaf = Deaf()
    outcome = fake.runner(publisher=deaf).run(fake.claim_one())
    assert outcome.execution is not None and outcome.execution.status is ExecutionStatus.SUCCESS
    assert deaf.handed == 0  # neither the started nor the finished event was built
    assert fake.metrics.finished == [("noop", "success", outcome.execution.duration, 1)]
    assert fake.store.get_job(job.id).next_run_at == fake.clock.now() + timedelta(seconds=30)


def test_errors_are_retried_with_backoff_until_success(fake: Harness, tmp_path: Path) -> None:
    assert isinstance(fake.clock, FakeClock)
    log = tmp_path / "calls"
    fake.add("test.flaky", payload={"succeed_on": 4, "path": str(log)}, max_retries=5, timeout=600)
    outcome = fake.runner().run(fake.claim_one())
    assert outcome.execution is not None
    assert outcome.execution.status is ExecutionStatus.SUCCESS
    assert outcome.execution.attempts == 4
    assert fake.clock.sleeps == [1.0, 2.0, 4.0]
    assert lines(log) == 4


def test_retries_run_out_as_failed_with_the_last_error(fake: Harness) -> None:
    fake.add("test.fail", payload={"message": "disk full"}, max_retries=2, timeout=600)
    outcome = fake.runner().run(fake.claim_one())
    assert outcome.execution is not None
    assert outcome.execution.status is ExecutionStatus.FAILED
    assert outcome.execution.attempts == 3
    assert outcome.execution.error == "RuntimeError: disk full"
    assert fake.publisher.types()[-1] == "job.execution.failed"


def test_retries_stop_at_the_deadline(fake: Harness) -> None:
    # 1 + 2 + 4 s of backoff fit in 10 s; the next wait (8 s) does not
    fake.add("test.fail", max_retries=10, timeout=10)
    outcome = fake.runner().run(fake.claim_one())
    assert outcome.execution is not None
    assert outcome.execution.status is ExecutionStatus.TIMEOUT
    assert outcome.execution.attempts == 4
    assert outcome.execution.error is not None and "planned failure" in outcome.execution.error


def test_a_sync_handler_ignoring_its_deadline_times_out_and_keeps_the_lock(real: Harness) -> None:
    job = real.add("test.sleep", payload={"seconds": 3}, timeout=0.3)
    runner = real.runner()
    outcome = runner.run(real.claim_one())
    assert outcome.execution is not None
    assert outcome.execution.status is ExecutionStatus.TIMEOUT
    assert real.invoker.abandoned == 1
    # the job advanced, but its lock stays until its TTL so the straggler does not overlap a new run
    assert real.store.get_job(job.id).lease is None
    assert real.locker is not None and real.locker.acquire(f"job:{job.id}", 1) is None


def run_in_thread(runner: Any, fire: Any) -> tuple[threading.Thread, list[Any]]:
    outcomes: list[Any] = []
    thread = threading.Thread(target=lambda: outcomes.append(runner.run(fire)), daemon=True)
    thread.start()
    return thread, outcomes


def test_an_inline_handler_ignoring_its_deadline_is_finished_while_it_runs_and_keeps_the_lock(
    inline: Harness, caplog: Any
) -> None:
    # serve runs sync handlers on the worker's own thread: at the deadline the fire is finished from another
    # thread (TIMEOUT, job advanced, lock kept), while the handler still holds the worker
    job = inline.add("test.sleep", payload={"seconds": 1.5}, timeout=0.3)
    stuck: list[threading.Thread] = []
    inline.invoker.on_stuck = stuck.append
    runner = inline.runner()
    fire = inline.claim_one()
    with caplog.at_level(logging.INFO, logger="ticklock"):
        thread, outcomes = run_in_thread(runner, fire)

        def finished() -> bool:
            found = inline.store.list_executions(job.id)
            return bool(found) and found[0].status is ExecutionStatus.TIMEOUT

        assert wait_until(finished)
        assert thread.is_alive() and outcomes == []  # the handler still sleeps on the worker
        assert stuck == [thread]
        assert inline.store.get_job(job.id).lease is None  # advanced
        assert inline.locker is not None and inline.locker.acquire(f"job:{job.id}", 1) is None  # lock kept
        assert inline.invoker.abandoned == 1
        thread.join(10)
    [outcome] = outcomes
    assert outcome.execution is not None and outcome.skipped is None
    [stored] = inline.store.list_executions(job.id)
    assert stored.status is ExecutionStatus.TIMEOUT and stored.attempts == 1
    assert stored.error is not None and stored.error.startswith("handler did not return within")
    # finished once: one event, one measure, and the straggler's return wrote nothing
    assert inline.publisher.types().count("job.execution.timeout") == 1
    assert len(inline.metrics.finished) == 1
    assert inline.invoker.abandoned == 0
    assert not [r for r in caplog.records if r.getMessage() in ("execution.finish_lost", "fire.advance_lost")]


def test_an_inline_run_cut_off_at_shutdown_is_interrupted_and_released(inline: Harness) -> None:
    entered, release = threading.Event(), threading.Event()

    def busy(ctx: Any) -> None:
        entered.set()
        release.wait(1.5)  # ignores the cut-off

    inline.registry.register("test.busy", busy)
    job = inline.add("test.busy", timeout=30)
    runner = inline.runner()
    fire = inline.claim_one()
    thread, _ = run_in_thread(runner, fire)
    assert entered.wait(10)  # the handler runs: the cut-off meets it, not the attempt's start
    runner.shutdown.set()
    inline.invoker.interrupt_all()

    def interrupted() -> bool:
        return inline.store.list_executions(job.id)[0].status is ExecutionStatus.INTERRUPTED

    def released() -> bool:  # the take-over's second write, after the execution's
        return inline.store.get_job(job.id).lease is None

    assert wait_until(interrupted)
    assert wait_until(released)
    assert thread.is_alive()
    after = inline.store.get_job(job.id)
    assert after.lease is None and after.next_run_at == job.next_run_at  # released, due again: resumed later
    assert inline.locker is not None and inline.locker.acquire(f"job:{job.id}", 1) is not None  # lock let go
    thread.join(10)
    assert inline.store.list_executions(job.id)[0].status is ExecutionStatus.INTERRUPTED


def test_an_inline_handler_that_fails_is_retried_on_the_same_thread(fake: Harness) -> None:
    seen: list[threading.Thread] = []

    def flaky(ctx: Any) -> None:
        seen.append(threading.current_thread())
        if ctx.attempt < 2:
            raise RuntimeError("first try")

    runner = fake.runner()
    runner.invoker = Invoker(inline=True)
    fake.registry.register("test.flaky_here", flaky)
    fake.add("test.flaky_here", max_retries=3, timeout=30)
    try:
        outcome = runner.run(fake.claim_one())
    finally:
        runner.invoker.close()
    assert outcome.execution is not None and outcome.execution.status is ExecutionStatus.SUCCESS
    assert isinstance(fake.clock, FakeClock) and fake.clock.sleeps == [1.0]  # (fake time: the backoff is instant)
    assert outcome.execution.attempts == 2
    assert seen == [threading.current_thread()] * 2


def test_an_async_handler_is_cancelled_at_its_deadline(real: Harness) -> None:
    real.add("test.async_sleep", payload={"seconds": 30}, timeout=0.3)
    outcome = real.runner().run(real.claim_one())
    assert outcome.execution is not None
    assert outcome.execution.status is ExecutionStatus.TIMEOUT
    assert real.invoker.abandoned == 0


def test_an_unknown_handler_is_skipped_counted_and_advanced(fake: Harness) -> None:
    job = fake.add("gone.away")
    outcome = fake.runner().run(fake.claim_one())
    assert outcome.skipped is SkipReason.UNKNOWN_HANDLER
    assert fake.metrics.skipped == [("gone.away", "unknown_handler")]
    assert fake.store.list_executions(job.id) == []
    after = fake.store.get_job(job.id)
    assert after.lease is None and after.next_run_at == fake.clock.now() + timedelta(seconds=60)


def test_a_duplicate_delivery_of_a_finished_fire_runs_nothing(fake: Harness, tmp_path: Path) -> None:
    log = tmp_path / "calls"
    job = fake.add("test.record", payload={"path": str(log)})
    fire = fake.claim_one()
    runner = fake.runner()
    first = runner.run(fire)
    second = runner.run(fire)
    assert first.execution is not None
    assert second.skipped is SkipReason.DUPLICATE
    assert lines(log) == 1
    assert len(fake.store.list_executions(job.id)) == 1


def test_concurrent_duplicate_deliveries_run_the_handler_once(real: Harness, tmp_path: Path) -> None:
    log = tmp_path / "calls"
    real.add("test.wait", payload={"seconds": 0.5, "path": str(log)}, timeout=5)
    fire = real.claim_one()
    runner = real.runner()
    outcomes = []
    start = threading.Barrier(4)

    def deliver() -> None:
        start.wait()
        outcomes.append(runner.run(fire))

    threads = [threading.Thread(target=deliver) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert lines(log) == 1
    assert sum(1 for o in outcomes if o.execution is not None) == 1
    assert {o.skipped for o in outcomes if o.skipped} <= {SkipReason.LOCK_HELD, SkipReason.DUPLICATE}


def test_a_lock_held_briefly_by_something_else_is_waited_for_and_the_fire_runs(fake: Harness) -> None:
    """A late copy of an earlier fire (SQS's at-least-once delivery) takes the job's lock for a moment, to
    meet its execution and let go. The next fire, arriving then, waits and runs: skipped as LOCK_HELD it
    would stay unrun until its claim ran out (seen in the Lambda shape's emulation)."""
    assert isinstance(fake.clock, FakeClock)
    job = fake.add("noop")
    fire = fake.claim_one()
    runner = fake.runner()
    assert fake.locker is not None and fake.locker.acquire(f"job:{job.id}", 0.2) is not None  # the copy's hold
    outcome = runner.run(fire)
    assert outcome.skipped is None and outcome.execution is not None
    assert outcome.execution.status is ExecutionStatus.SUCCESS
    assert 0.2 <= sum(fake.clock.sleeps) <= 1.0  # it waited for the hold to end, in short steps
    assert fake.store.get_job(job.id).lease is None  # and the job went on


def test_a_lock_held_by_the_fires_own_run_is_left_to_it_at_once(fake: Harness) -> None:
    """A second delivery meeting the run of its own fire (its execution recorded, the lock held) does
    not wait: that run decides."""
    assert isinstance(fake.clock, FakeClock)
    job = fake.add("noop")
    fire = fake.claim_one()
    runner = fake.runner()
    assert fake.locker is not None and fake.locker.acquire(f"job:{job.id}", 60) is not None
    fake.store.start_execution(make_execution(fire, started_at=fake.clock.now()))
    outcome = runner.run(fire)
    assert outcome.skipped is SkipReason.LOCK_HELD
    assert fake.clock.sleeps == []


def test_a_lock_still_held_after_the_wait_skips_the_fire(fake: Harness) -> None:
    """Held longer (a lock left by a runner that died): the fire waits its two seconds, then is skipped
    as LOCK_HELD, and its claim brings it back when it runs out."""
    assert isinstance(fake.clock, FakeClock)
    job = fake.add("noop")
    fire = fake.claim_one()
    runner = fake.runner()
    assert fake.locker is not None and fake.locker.acquire(f"job:{job.id}", 60) is not None
    outcome = runner.run(fire)
    assert outcome.skipped is SkipReason.LOCK_HELD
    assert 2.0 <= sum(fake.clock.sleeps) < 3.0
    assert fake.store.list_executions(job.id) == []


def test_a_fire_whose_owner_died_mid_run_is_resumed_once(fake: Harness, tmp_path: Path) -> None:
    assert isinstance(fake.clock, FakeClock)
    log = tmp_path / "calls"
    job = fake.add("test.record", payload={"path": str(log)}, timeout=10)
    fire = fake.claim_one()
    # the first owner recorded the start, then vanished (no finish, no advance, no release)
    orphan = fake.store.start_execution(make_execution(fire, started_at=fake.clock.now(), owner="dead")).execution
    assert fire.job.lease is not None
    fake.clock.advance((fire.job.lease.until - fake.clock.now()).total_seconds())
    refire = fake.claim_one()
    assert refire.key == fire.key
    outcome = fake.runner(owner="survivor").run(refire)
    assert outcome.execution is not None and outcome.execution.id == orphan.id
    stored = fake.store.get_execution(orphan.id)
    assert stored.status is ExecutionStatus.SUCCESS and stored.resumes == 1 and stored.owner == "survivor"
    assert lines(log) == 1
    assert fake.store.get_job(job.id).next_run_at == fake.clock.now() + timedelta(seconds=60)


def test_a_fire_that_keeps_losing_its_owner_is_given_up_as_lost(fake: Harness) -> None:
    fake.add("noop", timeout=10)
    fire = fake.claim_one()
    execution = fake.store.start_execution(make_execution(fire, owner="dead")).execution
    fake.store.take_over_execution(
        execution.with_changes(resumes=MAX_RESUMES, run_token="t2"), previous_token=execution.run_token
    )
    assert fire.job.lease is not None
    assert isinstance(fake.clock, FakeClock)
    fake.clock.advance((fire.job.lease.until - fake.clock.now()).total_seconds())
    outcome = fake.runner().run(fake.claim_one())
    assert outcome.skipped is SkipReason.GIVEN_UP
    assert fake.store.get_execution(execution.id).status is ExecutionStatus.LOST
    assert fake.publisher.types() == ["job.execution.lost"]
    assert fake.metrics.finished == [("noop", "lost", 0.0, 0)]
    assert fake.store.get_job(fire.job.id).lease is None


def test_an_interrupted_fire_is_released_then_resumed(real: Harness, tmp_path: Path) -> None:
    log = tmp_path / "calls"
    job = real.add("test.wait", payload={"seconds": 30, "path": str(log)}, timeout=60)
    runner = real.runner()
    fire = real.claim_one()
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(runner.run(fire)))
    worker.start()
    while lines(log) == 0:
        worker.join(0.01)
    runner.shutdown.set()
    real.invoker.interrupt_all()
    worker.join(10)
    [execution] = real.store.list_executions(job.id)
    assert execution.status is ExecutionStatus.INTERRUPTED
    assert real.publisher.types()[-1] == "job.execution.interrupted"
    # released, not advanced: the same fire is due again at once (made quick for the second run)
    job = real.store.get_job(job.id)
    real.store.update_job(job.with_changes(payload={"seconds": 0, "path": str(log)}), expected_version=job.version)
    again = real.claim_one()
    assert again.key == fire.key
    resumed = real.runner().run(again)
    assert resumed.execution is not None
    final = real.store.get_execution(execution.id)
    assert final.status is ExecutionStatus.SUCCESS and final.resumes == 1
    assert lines(log) == 2


def test_event_and_metrics_outages_never_fail_a_run(fake: Harness) -> None:
    job = fake.add("noop")
    runner = fake.runner(publisher=BrokenPublisher(), metrics=BrokenMetrics())
    outcome = runner.run(fake.claim_one())
    assert outcome.execution is not None
    assert fake.store.get_execution(outcome.execution.id).status is ExecutionStatus.SUCCESS
    assert fake.store.get_job(job.id).lease is None


def test_lock_backend_down_skips_by_default_and_counts_it(fake: Harness, tmp_path: Path) -> None:
    log = tmp_path / "calls"
    job = fake.add("test.record", payload={"path": str(log)})
    outcome = fake.runner(locker=DownLocker()).run(fake.claim_one())
    assert outcome.skipped is SkipReason.LOCK_UNAVAILABLE
    assert ("test.record", "lock_unavailable") in fake.metrics.skipped
    assert lines(log) == 0
    assert fake.store.get_job(job.id).lease is None


def test_lock_backend_down_with_run_policy_still_runs_once(fake: Harness, tmp_path: Path) -> None:
    log = tmp_path / "calls"
    fake.add("test.record", payload={"path": str(log)})
    fire = fake.claim_one()
    runner = fake.runner(locker=DownLocker(), lock_failure=LockFailure.RUN)
    assert runner.run(fire).execution is not None
    assert runner.run(fire).skipped is SkipReason.DUPLICATE
    assert lines(log) == 1


def test_a_one_shot_job_is_disabled_after_it_runs(fake: Harness) -> None:
    job = fake.add("noop", schedule=OnceSchedule(fake.clock.now()))
    fake.runner().run(fake.claim_one())
    after = fake.store.get_job(job.id)
    assert not after.enabled and after.next_run_at is None


def test_a_cron_job_gets_its_next_fire_time_from_now(fake: Harness) -> None:
    assert isinstance(fake.clock, FakeClock)
    job = fake.add("noop", schedule=CronSchedule("*/15 * * * * *"), next_run_at=fake.clock.now())
    fake.clock.advance(40)  # downtime: slots at 15, 30 were missed
    fake.runner().run(fake.claim_one())
    assert len(fake.store.list_executions(job.id)) == 1  # a missed fire runs once
    assert fake.store.get_job(job.id).next_run_at == fake.clock.now() + timedelta(seconds=5)


def test_a_manual_trigger_runs_without_moving_the_schedule(fake: Harness) -> None:
    later = fake.clock.now() + timedelta(hours=1)
    job = fake.add("noop", next_run_at=later)
    job = fake.store.update_job(job.with_changes(trigger_at=fake.clock.now()), expected_version=job.version)
    fire = fake.claim_one()
    assert fire.trigger is Trigger.MANUAL
    outcome = fake.runner().run(fire)
    assert outcome.execution is not None and outcome.execution.trigger is Trigger.MANUAL
    after = fake.store.get_job(job.id)
    assert after.next_run_at == later and after.trigger_at is None


def test_a_fire_whose_claim_was_taken_while_it_queued_is_not_run(fake: Harness, tmp_path: Path) -> None:
    assert isinstance(fake.clock, FakeClock)
    log = tmp_path / "calls"
    fake.add("test.record", payload={"path": str(log)}, timeout=10)
    fire = fake.claim_one()
    fake.clock.advance(31)  # the 30 s claim lapsed, and another claimer took the job
    again = fake.claim_one()
    assert again.key == fire.key and again.lease_token != fire.lease_token
    assert fake.runner().run(fire).skipped is SkipReason.LEASE_EXPIRED
    assert lines(log) == 0
    outcome = fake.runner().run(again)  # the claim that holds the job runs the fire
    assert outcome.execution is not None and outcome.execution.status is ExecutionStatus.SUCCESS
    assert lines(log) == 1


def test_a_fire_whose_claim_looks_short_but_is_still_its_own_renews_it_and_runs(fake: Harness, tmp_path: Path) -> None:
    assert isinstance(fake.clock, FakeClock)
    log = tmp_path / "calls"
    job = fake.add("test.record", payload={"path": str(log)}, timeout=10)
    fire = fake.claim_one()
    fake.clock.advance(29)  # of the 30 s claim, less than a heartbeat's interval is left: nobody took it
    outcome = fake.runner().run(fire)
    assert outcome.execution is not None and outcome.execution.status is ExecutionStatus.SUCCESS
    assert lines(log) == 1
    assert fake.store.get_job(job.id).lease is None  # advanced as usual


def test_a_store_outage_at_the_final_write_is_retried_not_run_twice(fake: Harness, tmp_path: Path) -> None:
    log = tmp_path / "calls"
    job = fake.add("test.record", payload={"path": str(log)})
    real_complete = fake.store.complete
    failures = [StoreUnavailable("the disk is busy"), StoreUnavailable("still busy")]

    def flaky_complete(*args: Any, **kwargs: Any) -> tuple[bool, bool]:
        if failures:
            raise failures.pop(0)
        return real_complete(*args, **kwargs)

    fake.store.complete = flaky_complete  # type: ignore[method-assign]
    outcome = fake.runner().run(fake.claim_one())
    assert outcome.execution is not None
    assert fake.store.get_execution(outcome.execution.id).status is ExecutionStatus.SUCCESS
    assert fake.store.get_job(job.id).lease is None
    assert lines(log) == 1
    assert isinstance(fake.clock, FakeClock)
    assert fake.clock.sleeps == [0.5, 1.0]


def test_a_schedule_that_cannot_compute_its_next_fire_disables_the_job_and_runs_the_fire_once(
    fake: Harness, tmp_path: Path, monkeypatch: Any, caplog: Any
) -> None:
    """Issue 10, finding 1: the advance raised, the worker crashed, the fire was resumed four times and the
    job's next_run_at stayed in the past. Fault injection: next_fire fails as the cron bug made it fail."""

    from ticklock.domain import fire_rules
    from ticklock.errors import InvalidJob

    def broken(job: Any, slot: Any, started: Any, now: Any) -> Any:
        raise InvalidJob("cron '0 */5 1 * * *' found no valid fire time", field="schedule.expr")

    log = tmp_path / "calls"
    job = fake.add("test.flaky", payload={"succeed_on": 1, "path": str(log)}, schedule=CronSchedule("0 */5 1 * * *"))
    monkeypatch.setattr(fire_rules, "following", broken)
    with caplog.at_level(logging.ERROR, logger="ticklock.lifecycle"):
        outcome = fake.runner().run(fake.claim_one())
    assert outcome.execution is not None
    assert fake.store.get_execution(outcome.execution.id).status is ExecutionStatus.SUCCESS
    assert lines(log) == 1  # the handler ran once
    after = fake.store.get_job(job.id)
    assert after.enabled is False and after.lease is None and after.next_run_at is None
    assert after.disabled_reason is not None and "found no valid fire time" in after.disabled_reason
    assert any(r.getMessage() == "fire.no_next_fire" for r in caplog.records)
    assert fake.metrics.disabled == ["test.flaky"]
    assert fake.publisher.types()[-1] == "job.disabled"
    monkeypatch.undo()
    assert (
        fake.store.claim_due(
            now=fake.clock.now() + timedelta(days=1),
            horizon=fake.clock.now() + timedelta(days=1),
            limit=10,
            owner="again",
            slack=timedelta(seconds=30),
        )
        == []
    )  # nothing left to resume or re-run


def test_fires_that_run_well_are_counted_in_a_summary_line_and_trouble_keeps_its_own(
    fake: Harness, caplog: Any
) -> None:
    """TICKLOCK_FIRE_LOG=summary (serve's default): no line per fire that ran well, one ``fires.summary``
    line per flush counting every fire, and the failed fire's warnings as before."""
    ok = fake.add("noop", schedule=IntervalSchedule(30))
    bad = fake.add("test.fail", payload={"message": "disk full"}, schedule=IntervalSchedule(30))
    runner = fake.runner(fire_log=FireLog.SUMMARY)
    with caplog.at_level(logging.INFO, logger="ticklock.lifecycle"):
        fires = {f.job.id: f for f in fake.claim()}
        assert set(fires) == {ok.id, bad.id}
        for fire in fires.values():
            runner.run(fire)
        per_fire = [(r.getMessage(), r.levelno, getattr(r, "job_id", None)) for r in caplog.records]
        assert per_fire == [
            ("attempt.failed", logging.WARNING, bad.id),
            ("execution.finished", logging.WARNING, bad.id),
        ]
        assert isinstance(fake.clock, FakeClock)
        fake.clock.advance(1.5)
        runner.tally.flush()
        runner.tally.flush()  # nothing ran since: no line
    summaries = [r for r in caplog.records if r.getMessage() == "fires.summary"]
    assert len(summaries) == 1
    summary = summaries[0].__dict__
    assert summary["started"] == 2
    assert summary["finished"] == {"success": 1, "failed": 1}
    assert summary["handlers"] == {"noop": 1, "test.fail": 1}
    assert summary["seconds"] == 1.5
    assert summary["lag_max"] >= summary["lag_mean"] >= 0


def test_each_fire_gets_a_started_and_a_finished_line_when_asked(fake: Harness, caplog: Any) -> None:
    job = fake.add("noop", schedule=IntervalSchedule(30))
    runner = fake.runner(fire_log=FireLog.EACH)
    with caplog.at_level(logging.INFO, logger="ticklock.lifecycle"):
        runner.run(fake.claim_one())
        runner.tally.flush()
    assert [(r.getMessage(), getattr(r, "job_id", None)) for r in caplog.records] == [
        ("execution.started", job.id),
        ("execution.finished", job.id),
    ]
