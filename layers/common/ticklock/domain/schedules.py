"""The three schedule shapes and their time arithmetic.

Policies (each one is tested in tests/unit/test_schedules.py):

* Cron has six fields, seconds first, evaluated in the job's IANA timezone (UTC by default).
* Spring-forward gap: a fire whose wall time does not exist that day runs once, at the instant the
  clocks jump (01:30 in Europe/London on 2026-03-29 runs at 02:00 BST). Several fires inside the gap
  collapse into that one, which loses no real time: the gap has no length in UTC.
* Fall-back overlap: a job with a fixed hour runs once, at the first occurrence of its wall time. A job
  whose hour field is ``*`` runs by real time, so it keeps firing through both passes of the hour.
* Missed fires after downtime run once, not once per missed slot; the next fire is computed from now
  (cron: next match after now; interval: now + interval).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from importlib import resources
from typing import Any, ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, CroniterError, croniter

from ticklock.clock import to_ms
from ticklock.errors import InvalidJob

CRON_FIELDS = ("second", "minute", "hour", "day-of-month", "month", "day-of-week")
_DESCRIPTORS = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
    "@minutely": "0 * * * * *",
}
# A probe value that every field accepts, used to validate one field at a time.
_NEUTRAL = ("0", "0", "0", "1", "1", "*")


@dataclass(frozen=True)
class CronSchedule:
    """Six cron fields, seconds first, in an IANA timezone."""

    expr: str
    timezone: str = "UTC"
    kind: ClassVar[str] = "cron"

    def __post_init__(self) -> None:
        _zone(self.timezone)
        _expand(self.expr)

    @property
    def fields(self) -> str:
        """The expression with descriptors expanded to six fields."""
        return _expand(self.expr)

    def first_after(self, now: datetime) -> datetime:
        return self.next_after(now)

    def next_after(self, after: datetime) -> datetime:
        """The first fire strictly after ``after``, as an aware UTC instant."""
        zone = _zone(self.timezone)
        fields = self.fields
        frequent_hours = fields.split()[2] in ("*", "*/1")
        it = croniter(fields, after.astimezone(zone), second_at_beginning=True)
        for _ in range(8):
            candidate: datetime = it.get_next(datetime)
            if not frequent_hours and _is_second_pass(candidate, zone):
                # a fixed-hour job skips the whole second pass at once, not fire by fire: `0 */5 1 * * *`
                # has 720 fires in a repeated 01:00 hour, and stepping through them ran past this loop
                resume = _end_of_second_pass(candidate, zone) - timedelta(seconds=1)
                it = croniter(fields, resume.astimezone(zone), second_at_beginning=True)
                continue
            return candidate.astimezone(UTC)
        raise InvalidJob(f"cron {self.expr!r} found no valid fire time", field="schedule.expr")


@dataclass(frozen=True)
class IntervalSchedule:
    """Every ``seconds`` seconds, measured from the end of the previous run."""

    seconds: int
    kind: ClassVar[str] = "interval"

    def __post_init__(self) -> None:
        if isinstance(self.seconds, bool) or not isinstance(self.seconds, int) or self.seconds < 1:
            raise InvalidJob("interval must be a whole number of seconds >= 1", field="schedule.seconds")

    def first_after(self, now: datetime) -> datetime:
        return now + timedelta(seconds=self.seconds)

    def next_after(self, after: datetime) -> datetime:
        return after + timedelta(seconds=self.seconds)


@dataclass(frozen=True)
class OnceSchedule:
    """One run at an instant; the job is disabled after it runs."""

    at: datetime
    kind: ClassVar[str] = "once"

    def __post_init__(self) -> None:
        if self.at.tzinfo is None:
            raise InvalidJob("once.at must carry a timezone (use Z for UTC)", field="schedule.at")
        try:
            object.__setattr__(self, "at", to_ms(self.at.astimezone(UTC)))
        except OverflowError:
            raise InvalidJob("once.at is out of range", field="schedule.at") from None

    def first_after(self, now: datetime) -> datetime:
        return self.at

    def next_after(self, after: datetime) -> None:
        return None


Schedule = CronSchedule | IntervalSchedule | OnceSchedule


def next_fire(schedule: Schedule, *, now: datetime) -> datetime | None:
    """When the job runs next after a run that ends at ``now``; None means disable it."""
    return schedule.next_after(now)


def schedule_to_dict(schedule: Schedule) -> dict[str, Any]:
    if isinstance(schedule, CronSchedule):
        return {"kind": "cron", "expr": schedule.expr, "timezone": schedule.timezone}
    if isinstance(schedule, IntervalSchedule):
        return {"kind": "interval", "seconds": schedule.seconds}
    return {"kind": "once", "at": schedule.at.isoformat()}


def schedule_from_dict(data: dict[str, Any]) -> Schedule:
    kind = data.get("kind")
    if kind == "cron":
        return CronSchedule(expr=data["expr"], timezone=data.get("timezone") or "UTC")
    if kind == "interval":
        return IntervalSchedule(seconds=data["seconds"])
    if kind == "once":
        return OnceSchedule(at=datetime.fromisoformat(data["at"]))
    raise InvalidJob(f"unknown schedule kind {kind!r}", field="schedule.kind")


@lru_cache(maxsize=1)
def known_zones() -> frozenset[str]:
    """The IANA names the pinned ``tzdata`` package lists. Names only a host has (``localtime``,
    ``posixrules``) are not in it: a job must mean the same instant on every machine."""
    return frozenset(resources.files("tzdata").joinpath("zones").read_text().split())


def check_new_timezone(name: str) -> str:
    """A timezone for a new or changed job: an IANA name the pinned ``tzdata`` lists (not a host-only name
    such as ``localtime``). Stored jobs are not re-checked on read, so a job saved before this rule still
    loads, runs and can be changed. Raises ``InvalidJob``."""
    if name not in known_zones():
        raise InvalidJob(
            f"unknown timezone {name[:64]!r}: use an IANA name such as 'Europe/London'", field="schedule.timezone"
        )
    _zone(name)
    return name


@lru_cache(maxsize=256)
def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidJob(
            f"unknown timezone {name!r}: use an IANA name such as 'Europe/London'", field="schedule.timezone"
        ) from exc


@lru_cache(maxsize=1024)
def _expand(expr: str) -> str:
    """Validate a cron expression and return its six fields; errors name the bad field."""
    text = " ".join(expr.split())
    if text.startswith("@"):
        if text.lower() not in _DESCRIPTORS:
            raise InvalidJob(
                f"unknown cron descriptor {text!r}; known: {', '.join(_DESCRIPTORS)}", field="schedule.expr"
            )
        return _DESCRIPTORS[text.lower()]
    parts = text.split(" ")
    if len(parts) != 6:
        raise InvalidJob(
            f"cron needs 6 fields (second minute hour day-of-month month day-of-week), got {len(parts)}",
            field="schedule.expr",
        )
    parts = [_collapse(value) for value in parts]
    text = " ".join(parts)
    for name, value in zip(CRON_FIELDS, parts, strict=True):
        tokens = re.split(r"[,/-]", value.upper())
        if any(t in ("R", "H") or t.startswith("H(") for t in tokens):
            # croniter's random (R) and hashed (H) values are not a schedule: R picks anew at every fire
            raise InvalidJob(
                f"cron field {name} uses {value!r}: random (R) and hashed (H) values are not supported",
                field="schedule.expr",
            )
    for index, (name, value) in enumerate(zip(CRON_FIELDS, parts, strict=True)):
        probe = list(_NEUTRAL)
        probe[index] = value
        if index in (3, 4):  # day-of-month and month are checked together with a free day
            probe[3 if index == 4 else 4] = "*"
        if not _valid(" ".join(probe)):
            raise InvalidJob(f"cron field {name} has an invalid value {value!r}", field="schedule.expr")
    if not _valid(text):
        raise InvalidJob(f"cron {text!r} is invalid", field="schedule.expr")
    try:
        croniter(text, datetime(2026, 1, 1, tzinfo=UTC), second_at_beginning=True).get_next(datetime)
    except CroniterBadDateError as exc:
        raise InvalidJob(f"cron {text!r} never fires", field="schedule.expr") from exc
    return text


_RANGE = re.compile(r"([A-Za-z0-9]+)-([A-Za-z0-9]+)(/\d+)?")


def _collapse(field: str) -> str:
    """``9-9``, ``MON-MON`` or ``5-5/2`` as the single value they mean. croniter 7.0.0 reads a range whose
    ends are equal as the whole field (``0 0 9-9 * * *`` fired every hour)."""
    items = []
    for item in field.split(","):
        match = _RANGE.fullmatch(item)
        if match:
            low, high = match.group(1), match.group(2)
            same = int(low) == int(high) if low.isdigit() and high.isdigit() else low.upper() == high.upper()
            if same:
                item = low
        items.append(item)
    return ",".join(items)


def _valid(six_fields: str) -> bool:
    try:
        croniter(six_fields, datetime(2026, 1, 1, tzinfo=UTC), second_at_beginning=True)
    except (CroniterBadCronError, CroniterError, ValueError, KeyError, IndexError):
        return False
    return True


def _end_of_second_pass(moment: datetime, zone: ZoneInfo) -> datetime:
    """The UTC instant the repeated wall-clock span that ``moment`` (a second-pass instant) falls in ends:
    the clock change plus its size, the change found by halving the span between the two passes."""
    wall = moment.astimezone(zone).replace(tzinfo=None)
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = moment.astimezone(UTC)
    size = second - first
    low, high = first, second  # the offset is the first pass's at low and the second's at high
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(zone).utcoffset() == first.astimezone(zone).utcoffset():
            low = middle
        else:
            high = middle
    return high + size


def _is_second_pass(moment: datetime, zone: ZoneInfo) -> bool:
    """True when ``moment``'s wall time occurs twice that day and this is the later occurrence."""
    wall = moment.astimezone(zone).replace(tzinfo=None)
    first = wall.replace(tzinfo=zone, fold=0)
    second = wall.replace(tzinfo=zone, fold=1)
    if first.utcoffset() == second.utcoffset():
        return False
    return moment.astimezone(UTC) == second.astimezone(UTC)
