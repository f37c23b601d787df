"""A second, deliberately naive reading of the README's cron dialect and DST policy, to test the engine
against. It shares no code with ``ticklock.domain``: its own parser, day rules written from their
definitions with ``calendar``, and no knowledge of when clocks change. It enumerates wall times day by
day, maps each through zoneinfo's PEP 495 ``fold`` and applies the policy to what comes back:

* a wall time that maps to one instant fires there;
* one that maps to two (an overlap) fires on the earlier, and on the later too when both passes count;
* one that round-trips to nothing (a gap) fires, under ``jump``, at the first second whose wall time is
  past it, found by walking the clock; under ``skip`` not at all.

The answer is the earliest of those instants after the given one, within the engine's documented span
(from 0001-01-02 to 9999-12-30 UTC, where every zone's wall clock stays in the calendar). Zones come from
the pinned ``tzdata`` package, as the engine's do. Slow on purpose; fine for tests.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from functools import cache, lru_cache
from importlib import resources
from zoneinfo import ZoneInfo

MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
WEEKDAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
FIRST = datetime(1, 1, 2, tzinfo=UTC)
LAST = datetime(9999, 12, 30, tzinfo=UTC)


@cache
def zone_named(name: str) -> ZoneInfo:
    with resources.files("tzdata").joinpath("zoneinfo", *name.split("/")).open("rb") as data:
        return ZoneInfo.from_file(data, key=name)


ALIASES = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
    "@minutely": "0 * * * * *",
}


def _value(token: str, names: list[str], base: int) -> int:
    if token in names:
        return names.index(token) + base
    return int(token)


def _expand(
    text: str, low: int, high: int, names: list[str] | None = None, base: int = 0, star_high: int | None = None
) -> set[int]:
    """Every value a numeric field names, by walking the field's values one by one. ``star_high`` is where
    ``*`` and an open ``a/step`` end and where a wrapping range turns round (6 for day-of-week, whose 7 is
    only ever an explicit end)."""
    names = names or []
    star_high = high if star_high is None else star_high
    out: set[int] = set()
    for item in text.split(","):
        part, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if part in ("*", "?"):
            first, last = low, star_high
        elif "-" in part:
            a, b = part.split("-")
            first, last = _value(a, names, base), _value(b, names, base)
        else:
            first = _value(part, names, base)
            last = star_high if step_text else first
        if star_high != high and first == high and last != high:
            first = low  # weekday 7 is Sunday, 0: a range or step from it starts the week
        sequence = [first]
        while sequence[-1] != last:
            value = sequence[-1]
            if value == star_high and last > star_high:
                sequence.append(value + 1)
            elif value >= star_high:
                sequence.append(low)
            else:
                sequence.append(value + 1)
            assert len(sequence) <= 100, text
        out.update(sequence[::step])
    return out


class Oracle:
    def __init__(self, expr: str, timezone: str = "UTC", gap: str = "jump", overlap: str = "auto") -> None:
        text = ALIASES.get(expr.strip().lower(), expr).upper().split()
        assert len(text) == 6, expr
        sec, minute, hour, dom, month, dow = text
        self.zone = zone_named(timezone)
        self.gap = gap
        self.seconds = sorted(_expand(sec, 0, 59))
        self.minutes = sorted(_expand(minute, 0, 59))
        self.hours = sorted(_expand(hour, 0, 23))
        self.months = _expand(month, 1, 12, MONTHS, 1)
        self.both = overlap == "both" or (overlap == "auto" and len(self.hours) == 24)
        self.dom_text, self.dow_text = dom, dow
        self.dom_parts = dom.split(",")
        self.dow_parts = dow.split(",")
        self.any_of_two = not (dom[0] in "*?" or dow[0] in "*?")
        self._jumps: list[datetime] = []

    # -- days, from the definitions --------------------------------------------------------------------

    def _dom_hit(self, d: date) -> bool:
        last = calendar.monthrange(d.year, d.month)[1]
        for part in self.dom_parts:
            if part == "LW":
                target = date(d.year, d.month, last)
                while target.weekday() >= 5:
                    target -= timedelta(days=1)
                if d == target:
                    return True
            elif part.startswith("L"):
                back = int(part[2:]) if part.startswith("L-") else 0
                if d.day == last - back:
                    return True
            elif part.endswith("W"):
                n = int(part[:-1])
                if n > last:
                    continue
                # the weekday nearest day n, staying in the month
                options = [date(d.year, d.month, n)]
                if options[0].weekday() >= 5:
                    options = [
                        date(d.year, d.month, k)
                        for k in range(max(1, n - 2), min(last, n + 2) + 1)
                        if date(d.year, d.month, k).weekday() < 5
                    ]
                    options.sort(key=lambda c: (abs(c.day - n), c.day))
                if d == options[0]:
                    return True
            elif d.day in _expand(part, 1, 31):
                return True
        return False

    def _dow_hit(self, d: date) -> bool:
        weekday = (d.isoweekday()) % 7  # Sunday = 0
        last = calendar.monthrange(d.year, d.month)[1]
        for part in self.dow_parts:
            if "#" in part:
                day_text, k = part.split("#")
                if _value(day_text, WEEKDAYS, 0) % 7 == weekday and (d.day - 1) // 7 + 1 == int(k):
                    return True
            elif part.endswith("L") or (part.startswith("L") and part != "L"):
                day_text = part[:-1] if part.endswith("L") else part[1:]
                if _value(day_text, WEEKDAYS, 0) % 7 == weekday and d.day > last - 7:
                    return True
            elif weekday in {v % 7 for v in _expand(part, 0, 7, WEEKDAYS, 0, star_high=6)}:
                return True
        return False

    def day(self, d: date) -> bool:
        if d.month not in self.months:
            return False
        dom, dow = self._dom_hit(d), self._dow_hit(d)
        return (dom or dow) if self.any_of_two else (dom and dow)

    # -- instants --------------------------------------------------------------------------------------

    def _instants(self, wall: datetime) -> list[datetime]:
        try:
            first = wall.replace(tzinfo=self.zone, fold=0).astimezone(UTC)
            second = wall.replace(tzinfo=self.zone, fold=1).astimezone(UTC)
        except OverflowError:  # a wall time of the year 1 or 9999 whose instant leaves the calendar
            return []
        real = [u for u in sorted({first, second}) if u.astimezone(self.zone).replace(tzinfo=None) == wall]
        if not real:  # a gap
            return [self._jump_after(wall, min(first, second))] if self.gap == "jump" else []
        if len(real) == 2 and not self.both:
            return real[:1]
        return real

    def _jump_after(self, wall: datetime, start: datetime) -> datetime:
        # every wall time of one gap jumps to the same instant: reuse one found within reach
        for known in self._jumps:
            before = (known - timedelta(seconds=1)).astimezone(self.zone).replace(tzinfo=None)
            if start < known <= start + timedelta(days=2) and before < wall < known.astimezone(self.zone).replace(
                tzinfo=None
            ):
                return known
        found = _walk_to(self.zone, wall, start)
        self._jumps.append(found)
        return found

    def _walls(self, d: date, floor: datetime) -> Iterator[datetime]:
        """The day's wall times in order, leaving out whole hours and minutes that end before ``floor``
        (wall times no instant after the one asked about can have)."""
        for h in self.hours:
            if datetime.combine(d, time(h, 59, 59)) <= floor:
                continue
            for m in self.minutes:
                if datetime.combine(d, time(h, m, 59)) <= floor:
                    continue
                for s in self.seconds:
                    wall = datetime.combine(d, time(h, m, s))
                    if wall > floor:
                        yield wall

    def next_after(self, after: datetime, horizon_days: int = 366 * 30) -> datetime | None:
        after = after.astimezone(UTC)
        low, high = _offset_bounds(self.zone, after.year)
        best: datetime | None = None
        start = date.fromordinal(max(1, after.toordinal() - 2))  # walls up to two days behind UTC
        for n in range(horizon_days):
            if start.toordinal() + n > LAST.date().toordinal():
                break
            d = start + timedelta(days=n)
            if best is not None and datetime.combine(d, time()) - high > best.replace(tzinfo=None):
                break
            if not self.day(d):
                continue
            for wall in self._walls(d, after.replace(tzinfo=None) + low):
                if best is not None and wall - high > best.replace(tzinfo=None):
                    break
                for instant in self._instants(wall):
                    if after < instant <= LAST and instant >= FIRST and (best is None or instant < best):
                        best = instant
            if d.year > after.year + 1 and d.month == 1 and d.day == 1:
                more = _offset_bounds(self.zone, d.year)
                low, high = min(low, more[0]), max(high, more[1])
        return best


def _walk_to(zone: ZoneInfo, wall: datetime, start: datetime) -> datetime:
    """The first UTC second from ``start`` whose wall time is past ``wall``: minutes, then seconds."""
    moment = start.replace(second=0)
    while (moment + timedelta(minutes=1)).astimezone(zone).replace(tzinfo=None) <= wall:
        moment += timedelta(minutes=1)
    while moment.astimezone(zone).replace(tzinfo=None) <= wall:
        moment += timedelta(seconds=1)
    return moment


@lru_cache(maxsize=4096)
def _offset_bounds(zone: ZoneInfo, year: int) -> tuple[timedelta, timedelta]:
    """The least and greatest UTC offset the zone uses from a year before ``year`` to a year after, by
    asking every hour (no two changes are an hour apart)."""
    moment = max(datetime(max(year - 1, 1), 1, 1, tzinfo=UTC), FIRST)
    end = datetime(year + 2, 1, 1, tzinfo=UTC) if year < 9998 else LAST
    seen = set()
    while moment < end:
        offset = moment.astimezone(zone).utcoffset()
        assert offset is not None
        seen.add(offset)
        moment += timedelta(hours=1)
    return min(seen), max(seen)


def clock_changes(zone_name: str, first_year: int, last_year: int) -> list[tuple[datetime, timedelta, timedelta]]:
    """Every (instant, offset before, offset after) from the start of ``first_year`` to the end of
    ``last_year``, by scanning hour by hour and then second by second inside the hour."""
    zone = zone_named(zone_name)
    moment = datetime(first_year, 1, 1, tzinfo=UTC)
    end = datetime(last_year + 1, 1, 1, tzinfo=UTC)
    changes = []
    previous = moment.astimezone(zone).utcoffset()
    while moment < end:
        following = moment + timedelta(hours=1)
        offset = following.astimezone(zone).utcoffset()
        if offset != previous:
            probe = moment
            while probe.astimezone(zone).utcoffset() == previous:
                probe += timedelta(seconds=1)
            assert previous is not None and offset is not None
            changes.append((probe, previous, offset))
            previous = offset
        moment = following
    return changes
