"""The rules a job must meet to be stored, beyond what each field checks of itself: its handler, timeout,
retries and payload (``check_job``), its jitter against its schedule, and its schedule's first fire.
The service applies them on create and update; the API's models check only shapes and ranges."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ticklock.domain.job_settings import Policy
from ticklock.domain.jobs import Job
from ticklock.domain.schedules import CronSchedule, IntervalSchedule, OnceSchedule, Schedule
from ticklock.errors import InvalidJob
from ticklock.handlers.contract import Registry

MAX_RETRIES = 25
MIN_TIMEOUT = 0.01  # seconds: below this a deadline is finer than the clock that checks it
MAX_PAYLOAD_DEPTH = 32
INT64_RANGE = (-(2**63), 2**63 - 1)
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # one encoder, not one a call


@dataclass(frozen=True)
class Limits:
    """Bounds a job must respect, from configuration."""

    max_timeout: float = 86400.0
    max_payload_bytes: int = 65536
    max_timeout_reason: str = "TICKLOCK_MAX_TIMEOUT"


def check_job(
    registry: Registry,
    limits: Limits,
    handler: str,
    schedule: Schedule,
    payload: Mapping[str, Any],
    timeout: float,
    max_retries: int,
    now: datetime,
    *,
    new_schedule: bool,
) -> None:
    """The rules a new or changed job must meet beyond its fields' own: a registered handler, a timeout and
    retries within bounds, a payload every store keeps unchanged, and (for a new schedule) a one-shot time
    still to come."""
    if handler not in registry:
        known = ", ".join(registry.names()) or "none"
        raise InvalidJob(f"unknown handler {handler!r}; registered handlers: {known}", field="handler")
    if not MIN_TIMEOUT <= timeout <= limits.max_timeout:
        raise InvalidJob(
            f"timeout must be at least {MIN_TIMEOUT:g} and at most {limits.max_timeout:g} seconds "
            f"({limits.max_timeout_reason}), got {timeout:g}",
            field="timeout",
        )
    if not 0 <= max_retries <= MAX_RETRIES:
        raise InvalidJob(f"max_retries must be between 0 and {MAX_RETRIES}", field="max_retries")
    check_payload(payload, "payload", 0)
    size = len(_COMPACT.encode(payload).encode())  # as UTF-8
    if size > limits.max_payload_bytes:
        raise InvalidJob(f"is {size} bytes as JSON; the limit is {limits.max_payload_bytes}", field="payload")
    if new_schedule and isinstance(schedule, OnceSchedule) and schedule.at <= now:
        raise InvalidJob(
            f"once.at {schedule.at.isoformat()} is in the past (now {now.isoformat()})", field="schedule.at"
        )


def check_payload(value: Any, where: str, depth: int) -> None:
    """The one payload rule, what every store holds and gives back unchanged (JSON's limits and BSON's
    together): nesting at most 32 deep; integers within 64 bits; finite floats; text that is valid
    Unicode (no lone surrogates); keys that are not empty, do not start with ``$`` and hold no ``.`` or
    NUL. Raises ``InvalidJob`` naming the first value at fault (``payload.a.b[2]``)."""
    if depth > MAX_PAYLOAD_DEPTH:
        raise InvalidJob(f"is nested more than {MAX_PAYLOAD_DEPTH} levels deep", field=where)
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, str):
        check_text(value, where, "text")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidJob("is not a finite number (JSON has no NaN or Infinity)", field=where)
        return
    if isinstance(value, int):
        if not INT64_RANGE[0] <= value <= INT64_RANGE[1]:
            raise InvalidJob("is an integer beyond 64 bits", field=where)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidJob("has a key that is not text", field=where)
            check_text(key, where, "key")
            if not key or key.startswith("$") or "." in key or "\x00" in key:
                raise InvalidJob(
                    "is not a usable key: keys must not be empty, start with '$', or hold '.' or NUL",
                    field=f"{where}.{key[:100]}",
                )
            check_payload(item, f"{where}.{key}", depth + 1)
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_payload(item, f"{where}[{index}]", depth + 1)
        return
    raise InvalidJob("is not a JSON value", field=where)


def check_text(text: str, where: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidJob(
            f"has a {what} with a lone surrogate (U+{ord(text[exc.start]):04X}): not valid Unicode", field=where
        ) from None


def unchanged(merged: Job, job: Job) -> bool:
    # Payloads compare as JSON: 1, 1.0 and true are equal in Python but not to the client that sent them.
    same_rest = merged.with_changes(updated_at=job.updated_at, payload=job.payload) == job
    return same_rest and json.dumps(merged.payload) == json.dumps(job.payload)


JITTER_SPACING_FIRES = 100  # the fires whose spacing bounds a job's jitter


def check_jitter(schedule: Schedule, policy: Policy, now: datetime) -> None:
    """A fire's jitter must leave it before the next slot: ``max_jitter`` below the schedule's shortest gap
    between two fires (an interval's length; for cron, over its next JITTER_SPACING_FIRES fires)."""
    if not policy.max_jitter:
        return
    if isinstance(schedule, IntervalSchedule):
        gap: float = schedule.seconds
    elif isinstance(schedule, CronSchedule):
        fires = [f.at for f in schedule.upcoming(now, JITTER_SPACING_FIRES)]
        gap = min(((b - a).total_seconds() for a, b in itertools.pairwise(fires)), default=math.inf)
    else:
        return  # one fire: any offset keeps it apart from the next
    if policy.max_jitter >= gap:
        raise InvalidJob(
            f"must be less than the shortest gap between the schedule's fires ({gap:g} s), got {policy.max_jitter:g}",
            field="policy.max_jitter",
        )


@dataclass
class Searched:
    """What the new jobs of one create (one job, or a batch) have searched their schedules for: each
    schedule's first fire, and the (schedule, policy) pairs whose jitter was found to fit (a cron's next
    100 fires each). Many jobs of a batch share a schedule; each search is made once."""

    firsts: dict[Schedule, datetime | None] = field(default_factory=dict)
    jitter_ok: set[tuple[Schedule, Policy]] = field(default_factory=set)

    def first_fire(self, schedule: Schedule, now: datetime) -> datetime | None:
        if schedule not in self.firsts:
            self.firsts[schedule] = first_fire(schedule, now)
        return self.firsts[schedule]

    def check_jitter(self, schedule: Schedule, policy: Policy, now: datetime) -> None:
        if (schedule, policy) not in self.jitter_ok:
            check_jitter(schedule, policy, now)
            self.jitter_ok.add((schedule, policy))


def first_fire(schedule: Schedule, now: datetime) -> datetime | None:
    """A new, changed or resumed schedule's first fire; a cron schedule without one is refused."""
    first = schedule.first_after(now)
    if first is None and isinstance(schedule, CronSchedule):
        if schedule.gap == "skip":
            message = (
                f"cron {schedule.expr!r} never fires in {schedule.timezone} with gap=skip: its next matches all "
                "fall in spring-forward gaps (use gap=jump to run them as the clocks jump)"
            )
        else:
            message = f"cron {schedule.expr!r} has no fire left before the year 10000"
        raise InvalidJob(message, field="schedule.expr")
    return first
