"""The three schedule shapes and their time arithmetic.

Cron fields are ticklock's own dialect (``domain/cron.py``), read on the wall clock of the job's IANA
timezone (UTC by default). Where the wall clock is not one-to-one with real time, the job's two DST
choices decide, and each fire that a clock change moved is marked (``Fire.change``):

* **gap** (spring forward: some wall times do not exist that day). ``jump``, the default: the fires
  whose wall time does not exist run once, at the instant the clocks jump (01:30 in Europe/London on the
  last Sunday of March runs at 01:00:00 UTC, which is 02:00 BST), and the fire at the new wall time of that instant
  is the same fire. ``skip``: they do not run.
* **overlap** (fall back: some wall times occur twice). ``first``: a wall time fires once, on its first
  pass. ``both``: by real time, on both passes. ``auto``, the default: ``both`` when the hour field
  selects every hour (``*``, ``*/1``, ``0-23``), since such a job means "every so often", else ``first``.
* Missed fires after downtime run once, not once per missed slot; the next fire is computed from now
  (cron: next match after now; interval: now + interval).

How: a zone's offsets change at known instants (``domain/zones.py``); between two changes wall time is
UTC plus a constant, so the next fire is one search of the cron fields; at a change the rule above
applies; a match days away is reached in one step. So ``next_after`` costs microseconds in any zone,
a millisecond or two when a zone's changes are first looked up, and never gives up on an accepted
expression (``bench/schedules.py``); the property tests compare it with a brute-force oracle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, ClassVar, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ticklock.clock import to_ms
from ticklock.domain import cron, zones
from ticklock.domain.zones import FIRST_INSTANT, LAST_INSTANT, timeline
from ticklock.errors import InvalidJob

GAP_CHOICES = ("jump", "skip")
OVERLAP_CHOICES = ("auto", "first", "both")
MAX_PREVIEW = 1000
# More than the widest gap between two UTC offsets one zone has used (25 hours: Pacific/Kiritimati went
# from -10:40 to +14:00), so an instant this far before a wall time cannot show it in any zone.
MARGIN = 2 * 86400
# With gap="skip", a search whose next this many matches all fall in spring-forward gaps decides the
# schedule never fires: such a schedule sits on the change itself (the last Sunday of March at 01:30 in
# London), and without a bound it would be searched to the year 9999.
MAX_SKIPPED_GAPS = 10


@dataclass(frozen=True)
class Fire:
    """One upcoming fire, for previews: when, the wall clock then, and what a clock change did to it."""

    at: datetime  # UTC
    local: datetime  # the same instant on the job's wall clock
    change: Literal["gap", "overlap-first", "overlap-second"] | None = None
    scheduled: datetime | None = None  # for a gap fire: the (non-existent) wall time it was due at


@dataclass(frozen=True)
class CronSchedule:
    """Six cron fields, seconds first, in an IANA timezone, with the job's DST choices."""

    expr: str
    timezone: str = "UTC"
    gap: str = "jump"
    overlap: str = "auto"
    kind: ClassVar[str] = "cron"
    _parsed: cron.CronExpr = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _zone(self.timezone)
        if self.gap not in GAP_CHOICES:
            raise InvalidJob(f"gap must be one of {', '.join(GAP_CHOICES)}, not {self.gap!r}", field="schedule.gap")
        if self.overlap not in OVERLAP_CHOICES:
            raise InvalidJob(
                f"overlap must be one of {', '.join(OVERLAP_CHOICES)}, not {self.overlap!r}", field="schedule.overlap"
            )
        object.__setattr__(self, "_parsed", _parse(self.expr))

    @property
    def fields(self) -> str:
        """The expression with descriptors expanded to six fields."""
        return self._parsed.text

    @property
    def both_passes(self) -> bool:
        """Whether a repeated wall time fires on its second pass too."""
        return self.overlap == "both" or (self.overlap == "auto" and self._parsed.every_hour)

    def first_after(self, now: datetime) -> datetime | None:
        return self.next_after(now)

    def next_after(self, after: datetime) -> datetime | None:
        """The first fire strictly after ``after``, as an aware UTC instant. None when there is none before
        9999-12-30 (where local times start to leave the calendar), or, with gap="skip", when the next
        MAX_SKIPPED_GAPS matches all fall in gaps; a job cannot be given such a schedule."""
        found = _next_cached(self, _seconds(after))
        return None if found is None else datetime.fromtimestamp(found[0], UTC)

    def upcoming(self, after: datetime, count: int) -> list[Fire]:
        """The next ``count`` fires strictly after ``after``, each marked when a clock change moved it."""
        zone = _zone(self.timezone)
        fires: list[Fire] = []
        moment = _seconds(after)
        while len(fires) < count:
            found = self._next(moment)
            if found is None:
                break
            at, scheduled = found
            instant = datetime.fromtimestamp(at, UTC)
            local = instant.astimezone(zone)
            if scheduled is not None:
                fires.append(Fire(instant, local, "gap", cron.wall_datetime(scheduled)))
            else:
                fires.append(Fire(instant, local, _pass(local, zone)))
            moment = at
        return fires

    def _next(self, after: int) -> tuple[int, int | None] | None:
        """(instant, None) for an ordinary fire, (the jump's instant, the missing wall time) for a gap fire."""
        parsed, line, both = self._parsed, timeline(self.timezone), self.both_passes
        start = max(after + 1, FIRST_INSTANT)  # fires are whole seconds; the first candidate
        seen = after  # changes after this instant are still to be looked at
        known: tuple[int, int] | None = None  # (low, wall): wall is the first match at or after low
        skipped = 0  # matches skipped in gaps (gap="skip")
        while start <= LAST_INSTANT:
            offset = line.offset(start)
            if not both:
                # a wall time repeated after a fall-back was already passed on its first pass: skip it
                change = line.last_change(start)
                if change is not None and not change.forward and start < change.at + change.size:
                    start = change.at + change.size
                    offset = line.offset(start)
            low = start + offset
            if known is not None and known[0] <= low <= known[1]:
                wall: int | None = known[1]  # nothing matches between the two lows
            elif known is not None and low < known[0]:
                earlier = parsed.next_wall(low, before=known[0])
                wall = known[1] if earlier is None else earlier
            else:
                wall = parsed.next_wall(low)
            if wall is None or wall - offset > LAST_INSTANT:
                return None
            known = (low, wall)
            candidate = wall - offset
            horizon = start + MARGIN
            change = line.first_change(seen, min(candidate, horizon))
            if change is None:
                if candidate <= horizon:
                    return candidate, None
                # The match is days away. No instant earlier than MARGIN before it can show its wall time
                # (offsets differ by less than MARGIN), and every wall time before it is no match, so the
                # changes in between move no fire: go on from there, not change by change.
                start = seen = candidate - MARGIN
                continue
            if change.forward:
                gap_from, gap_to = change.at + change.before, change.at + change.after
                missing = wall if change.at > start else parsed.next_wall(gap_from, before=gap_to)
                if missing is not None and gap_from <= missing < gap_to:
                    if self.gap == "jump":
                        return change.at, missing
                    skipped += 1
                    if skipped > MAX_SKIPPED_GAPS:
                        return None  # every match lands in a gap (0 30 1 ? 3 0L in London): it never fires
            start = seen = change.at
        return None


@lru_cache(maxsize=4096)
def _parse(expr: str) -> cron.CronExpr:
    return cron.parse(expr)


@lru_cache(maxsize=256)  # a burst needs a few; each entry keeps its schedule (and parsed fields) alive
def _next_cached(schedule: CronSchedule, after: int) -> tuple[int, int | None] | None:
    """``schedule._next(after)``, remembered: the jobs that share a schedule and fire together (a burst of
    ``0 0 * * * *`` jobs at the top of the hour) each ask for the same next instant as they advance, and a
    hit spares the search. The key is the whole schedule (expression, zone, gap and overlap
    choices): schedules are frozen values, and a process's zone rules do not change under it."""
    return schedule._next(after)


def _seconds(moment: datetime) -> int:
    """An aware instant as whole epoch seconds, rounded down, in integers (a float's 53 bits lose the
    microseconds of instants centuries away and would round 11:59:59.999999 up to 12:00)."""
    return (moment - _EPOCH) // timedelta(seconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _pass(local: datetime, zone: ZoneInfo) -> Literal["overlap-first", "overlap-second"] | None:
    """Which pass of a repeated wall time ``local`` is, or None when its wall time occurs once."""
    wall = local.replace(tzinfo=None)
    first = wall.replace(tzinfo=zone, fold=0)
    second = wall.replace(tzinfo=zone, fold=1)
    if first.utcoffset() == second.utcoffset() or first.astimezone(UTC) > second.astimezone(UTC):
        return None  # once, or a gap wall time (not a fire's own: gap fires are marked by the search)
    return "overlap-first" if local.fold == 0 else "overlap-second"


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


def upcoming(schedule: Schedule, *, after: datetime, count: int) -> list[Fire]:
    """The schedule's next ``count`` fires after ``after`` (an interval's as if each run took no time)."""
    if isinstance(schedule, CronSchedule):
        return schedule.upcoming(after, count)
    if isinstance(schedule, IntervalSchedule):
        try:
            moments = [after + timedelta(seconds=schedule.seconds * n) for n in range(1, count + 1)]
        except OverflowError:
            moments = []
        return [Fire(moment, moment) for moment in moments]
    return [Fire(schedule.at, schedule.at)] if schedule.at > after and count > 0 else []


def schedule_to_dict(schedule: Schedule) -> dict[str, Any]:
    if isinstance(schedule, CronSchedule):
        return {
            "kind": "cron",
            "expr": schedule.expr,
            "timezone": schedule.timezone,
            "gap": schedule.gap,
            "overlap": schedule.overlap,
        }
    if isinstance(schedule, IntervalSchedule):
        return {"kind": "interval", "seconds": schedule.seconds}
    return {"kind": "once", "at": schedule.at.isoformat()}


def schedule_from_dict(data: dict[str, Any]) -> Schedule:
    kind = data.get("kind")
    if kind == "cron":
        return CronSchedule(
            expr=data["expr"],
            timezone=data.get("timezone") or "UTC",
            gap=data.get("gap") or "jump",
            overlap=data.get("overlap") or "auto",
        )
    if kind == "interval":
        return IntervalSchedule(seconds=data["seconds"])
    if kind == "once":
        return OnceSchedule(at=datetime.fromisoformat(data["at"]))
    raise InvalidJob(f"unknown schedule kind {kind!r}", field="schedule.kind")


def check_new_timezone(name: str) -> str:
    """A timezone for a new or changed job: an IANA name the pinned ``tzdata`` lists (not a host-only name
    such as ``localtime``). Stored jobs are not re-checked on read, so a job saved before this rule still
    loads, runs and can be changed. Raises ``InvalidJob``."""
    if name not in zones.known_zones():
        raise InvalidJob(
            f"unknown timezone {name[:64]!r}: use an IANA name such as 'Europe/London'", field="schedule.timezone"
        )
    _zone(name)
    return name


def _zone(name: str) -> ZoneInfo:
    try:
        return zones.load(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # OSError: a folder's name, or a very long one
        raise InvalidJob(
            f"unknown timezone {name!r}: use an IANA name such as 'Europe/London'", field="schedule.timezone"
        ) from exc
