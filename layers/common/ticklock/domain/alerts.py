"""Missed-run and failure alerts: a dead-man's switch, built in.

A job may carry ``AlertRules``: ``late_after`` (a fire has not started that long after it was due),
``no_success_for`` (no run has succeeded for that long) and ``failures_in_a_row``. A condition that
holds raises an alert once, and clears it once when it stops holding:

* the state is the job's ``open_alerts``, changed only by ``JobStore.set_open_alerts``, a compare-and-set:
  of any number of replicas raising (or clearing) one alert at once, exactly one wins, and only the
  winner tells anyone;
* ``failures_in_a_row`` is judged when a run ends (``finished``); a success clears every alert of the
  job. ``late`` is cleared when the late fire starts (``started``);
* the dead-man conditions (``late``, ``no_success``) are judged by ``check``, once a minute on the
  housekeeping of ``ticklock serve`` and of the Lambda tick, whether anything runs or not. A paused job
  is neither late nor failing: its alerts clear.

Each change goes to the event bus (``job.alert.raised`` / ``job.alert.cleared``), to the job's webhook
(a signed JSON POST, through the ``WebhookSender`` port) and to its email address (the ``EmailSender``
port), either defaulting to the deployment's. Deliveries are retried in the background by an ``Outbox``
(the port; ``ticklock.engine.outbox`` is the one), and ``flush`` waits for them at the end of a Lambda
invocation or a shutdown.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from ticklock.clock import Clock
from ticklock.domain.events import ExecutionEvent
from ticklock.domain.executions import Execution, ExecutionStatus
from ticklock.domain.fires import Trigger
from ticklock.domain.job_settings import Condition
from ticklock.domain.jobs import Job
from ticklock.errors import JobNotFound
from ticklock.ports import ExecutionStore, JobStore, Outbox, Publisher

log = logging.getLogger("ticklock.alerts")
CAS_TRIES = 5
PAGE = 500  # jobs one check reads at a time


@dataclass(frozen=True)
class Alert:
    """One alert of one job, raised or cleared."""

    job_id: str
    job_name: str
    condition: Condition
    raised_at: datetime
    detail: str
    cleared_at: datetime | None = None

    @property
    def kind(self) -> str:
        return "job.alert.cleared" if self.cleared_at else "job.alert.raised"

    def document(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "job_id": self.job_id,
            "job_name": self.job_name,
            "condition": self.condition.value,
            "raised_at": self.raised_at.isoformat(),
            "cleared_at": self.cleared_at.isoformat() if self.cleared_at else None,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Destinations:
    """The deployment's defaults for a job that names no webhook or address of its own."""

    webhook: str | None = None
    email: str | None = None


_FAILED = frozenset(s for s in ExecutionStatus if s.final and s is not ExecutionStatus.SUCCESS)


def alerting_jobs(store: JobStore) -> Iterator[Job]:
    """Every job with alert rules or alerts raised, a page at a time (``JobStore.list_jobs(alerting=True)``)."""
    after: str | None = None
    while True:
        page = store.list_jobs(alerting=True, limit=PAGE, after=after)
        yield from page
        if len(page) < PAGE:
            return
        after = page[-1].id


class AlertsStore(JobStore, ExecutionStore, Protocol):
    """The roles ``Alerts`` uses: the jobs (their rules, their open alerts) and their runs."""


class Alerts:
    """Judges a job's alert rules and raises or clears its alerts once, whatever the replicas."""

    def __init__(
        self,
        *,
        store: AlertsStore,
        publisher: Publisher,
        clock: Clock,
        outbox: Outbox | None = None,
        defaults: Destinations | None = None,
    ) -> None:
        self.store = store
        self.publisher = publisher
        self.clock = clock
        self.outbox = outbox
        self.defaults = defaults or Destinations()

    # -- from the lifecycle --------------------------------------------------------------------------
    def started(self, job: Job) -> None:
        """A fire of ``job`` started: it is no longer late."""
        if Condition.LATE in job.open_alerts:
            self._change(job, Condition.LATE, None)

    def finished(self, job: Job, execution: Execution) -> None:
        """A scheduled run of ``job`` ended: a success clears its alerts; a failure may make
        ``failures_in_a_row``. Manual and backfill runs are not the schedule's health: not judged."""
        rules = job.alerts
        if execution.trigger is not Trigger.SCHEDULE:
            return
        if execution.status is ExecutionStatus.SUCCESS:
            if rules is not None:
                job = self.store.get_job(job.id)  # the claim's copy may predate an alert raised since
            for condition in list(job.open_alerts):
                self._change(job, Condition(condition), None)
            return
        if rules is None or rules.failures_in_a_row is None or execution.status not in _FAILED:
            return
        count = rules.failures_in_a_row
        # the schedule's runs only: a manual or backfill run neither adds to the streak nor breaks it
        listed = self.store.list_executions(job.id, limit=min(4 * count + 10, 1000))
        recent = [e for e in listed if e.trigger is Trigger.SCHEDULE][:count]
        if len(recent) == count and all(e.status in _FAILED for e in recent):
            detail = f"the last {count} runs failed; the last: {execution.status.value}: {execution.error or '-'}"
            self._change(job, Condition.FAILURES, detail)

    # -- from housekeeping ---------------------------------------------------------------------------
    def check(self) -> int:
        """Judge the dead-man conditions of every job with alert rules (or alerts raised); returns how many
        alerts it raised or cleared."""
        changed = 0
        for job in alerting_jobs(self.store):
            try:
                changed += self._judge(job)
            except Exception as exc:  # noqa: BLE001 - one job's trouble must not stop the others' check
                log.warning("alert.check_failed", extra={"job_id": job.id, "error": f"{type(exc).__name__}: {exc}"})
        return changed

    def _judge(self, job: Job) -> int:
        now = self.clock.now()
        rules = job.alerts
        wanted: dict[Condition, str | None] = {c: None for c in Condition if c.value in job.open_alerts}
        if rules is not None and job.enabled:
            if rules.late_after is not None:
                wanted[Condition.LATE] = self._late(job, rules.late_after, now)
            if rules.no_success_for is not None:
                wanted[Condition.NO_SUCCESS] = self._no_success(job, rules.no_success_for, now)
            if rules.failures_in_a_row is not None and Condition.FAILURES.value in job.open_alerts:
                wanted.pop(Condition.FAILURES)  # judged when a run ends, not here
        return sum(self._change(job, condition, detail) for condition, detail in wanted.items())

    def _late(self, job: Job, late_after: float, now: datetime) -> str | None:
        slot = job.next_run_at
        due = job.jittered(slot)
        if slot is None or due is None or (now - due).total_seconds() <= late_after:
            return None
        if self.store.execution_for(job.id, Trigger.SCHEDULE, slot) is not None:
            return None  # it started
        return f"the fire due at {due.isoformat()} has not started after {late_after:g} s"

    def _no_success(self, job: Job, seconds: float, now: datetime) -> str | None:
        since = now - timedelta(seconds=seconds)
        if job.created_at > since:
            return None  # too new to have missed anything
        found = self.store.executions_between(job.id, start=since, end=now, limit=1, statuses=["success"])
        return None if found else f"no run has succeeded for {seconds:g} s"

    # -- raising and clearing, once ------------------------------------------------------------------
    def _change(self, job: Job, condition: Condition, detail: str | None) -> bool:
        """Raise (``detail`` given) or clear (None) ``condition`` on the job, unless it already is so; the
        one caller whose compare-and-set applies delivers the news. Returns whether it changed it."""
        current = job
        for _ in range(CAS_TRIES):
            alerts = dict(current.open_alerts)
            now = self.clock.now()
            if detail is not None:
                if condition.value in alerts:
                    return False
                alerts[condition.value] = {"raised_at": now.isoformat(), "detail": detail}
            else:
                if condition.value not in alerts:
                    return False
                raised = alerts.pop(condition.value)
            if self.store.set_open_alerts(current.id, expected=current.open_alerts, new=alerts):
                if detail is not None:
                    self._tell(Alert(job.id, job.name, condition, now, detail), current)
                else:
                    at = datetime.fromisoformat(raised["raised_at"])
                    alert = Alert(job.id, job.name, condition, at, raised.get("detail", ""), cleared_at=now)
                    self._tell(alert, current)
                return True
            try:
                current = self.store.get_job(job.id)  # somebody else changed them first: look again
            except JobNotFound:
                return False
        return False

    def _tell(self, alert: Alert, job: Job) -> None:
        fields = {"job_id": alert.job_id, "condition": alert.condition.value}
        level = logging.INFO if alert.cleared_at else logging.WARNING
        log.log(level, alert.kind.removeprefix("job."), extra={**fields, "detail": alert.detail})
        try:
            event = ExecutionEvent.alert_of(
                alert.kind, alert.job_id, alert.job_name, alert.document(), self.clock.now()
            )
            self.publisher.publish(event)
        except Exception as exc:  # noqa: BLE001 - the bus fails soft
            log.warning("publish.failed", extra={**fields, "error": str(exc)})
        if self.outbox is None:
            return
        rules = job.alerts
        webhook = (rules.webhook if rules else None) or self.defaults.webhook
        email = (rules.email if rules else None) or self.defaults.email
        if webhook:
            self.outbox.post(webhook, alert.document())
        if email:
            what = "cleared" if alert.cleared_at else "raised"
            subject = f"ticklock: {alert.job_name}: {alert.condition.value} {what}"
            body = "\n".join(f"{k}: {v}" for k, v in alert.document().items() if v is not None) + "\n"
            self.outbox.mail(email, subject, body)

    def flush(self, timeout: float) -> None:
        if self.outbox is not None and not self.outbox.flush(timeout):
            log.warning("alert.deliveries_left", extra={"timeout": timeout})

    def close(self) -> None:
        if self.outbox is not None:
            self.outbox.close()
