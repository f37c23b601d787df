"""ticklock's cron dialect: six fields, seconds first, parsed and searched on wall-clock time.

The whole dialect (the README's "Schedules and time" shows it with examples):

=============  ==========  =============================================================
field          values      besides ``*``, numbers, ``a-b`` ranges, ``/step`` and lists
=============  ==========  =============================================================
second         0-59
minute         0-59
hour           0-23
day-of-month   1-31        ``?``; ``L`` last day, ``L-n`` n days before it, ``nW`` the weekday
                           nearest day n (within the month), ``LW`` the last weekday
month          1-12        names ``JAN``-``DEC``
day-of-week    0-7         0 and 7 are Sunday; names ``SUN``-``SAT``; ``?``; ``nL`` / ``Ln``
                           the last weekday n of the month; ``n#k`` the k-th (k 1-5)
=============  ==========  =============================================================

* A range may wrap (``22-2`` is 22, 23, 0, 1, 2; ``FRI-MON`` is Friday to Monday); ``a/step`` runs from a
  to the field's end; a step larger than the field selects only its start; ``9-9`` is just 9.
* Day-of-month and day-of-week combine as in crontab(5): if either field starts with ``*`` or ``?``
  a day must match both, otherwise (both restricted) a day matching either fires. So
  ``0 0 0 1 * MON`` runs on the 1st and on every Monday, ``0 0 0 */2 * MON`` on odd-numbered Mondays.
* Descriptors: ``@yearly @annually @monthly @weekly @daily @midnight @hourly @minutely``.
* An expression that can never fire (``0 0 0 30 2 *``) is refused.

Wall times here are whole seconds on a naive local clock counted from 1970-01-01 00:00, so the search
is integer arithmetic and never touches a timezone: ``domain/schedules.py`` maps them to instants.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from calendar import monthrange
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from ticklock.errors import InvalidJob

DESCRIPTORS = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
    "@minutely": "0 * * * * *",
}
_BOUNDS = {"second": (0, 59), "minute": (0, 59), "hour": (0, 23), "day-of-month": (1, 31), "month": (1, 12)}
_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_MONTHS = {name: n for n, name in enumerate(_MONTH_NAMES, 1)}
_DAYS = {name: n for n, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
_EPOCH = date(1970, 1, 1).toordinal()
_WALL_ZERO = datetime(1970, 1, 1)
LAST_YEAR = 9999

_BLANKS = re.compile(r"[ \t\r\n]+")  # not str.split(): it also splits on \x1c-\x1f
_ITEM = re.compile(r"(?P<start>\*|[A-Z0-9]+)(?:-(?P<end>[A-Z0-9]+))?(?:/(?P<step>[0-9]+))?")


def _error(name: str, message: str) -> InvalidJob:
    return InvalidJob(f"cron field {name}: {message}", field="schedule.expr")


@dataclass(frozen=True)
class CronExpr:
    """A parsed expression: the values each field selects, and the day rules."""

    text: str  # the six fields, as written (descriptors expanded)
    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: frozenset[int]
    dom: frozenset[int]  # plain days of the month
    dom_last: frozenset[int]  # L (0) and L-n (n): days counted back from the month's last
    dom_nearest: frozenset[int]  # nW
    dom_last_weekday: bool  # LW
    dow: frozenset[int]  # plain weekdays, 0 = Sunday
    dow_nth: frozenset[tuple[int, int]]  # n#k as (weekday, k)
    dow_last: frozenset[int]  # nL
    either_day: bool  # both day fields restricted: a day matching either fires
    _days: dict[tuple[int, int], tuple[int, ...]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def every_hour(self) -> bool:
        """The hour field selects all 24 hours (``*``, ``*/1``, ``0-23``...): the overlap rule's 'auto'."""
        return len(self.hours) == 24

    def days(self, year: int, month: int) -> tuple[int, ...]:
        """The days of that month the day fields select, ascending."""
        first, length = monthrange(year, month)
        key = ((first + 1) % 7, length)  # weekday of the 1st with Sunday = 0, and the month's length
        found = self._days.get(key)
        if found is None:
            found = self._days[key] = tuple(d for d in range(1, length + 1) if self._day(d, *key))
        return found

    def _day(self, day: int, first: int, length: int) -> bool:
        weekday = (first + day - 1) % 7
        in_dom = (
            day in self.dom
            or (length - day) in self.dom_last
            or any(_nearest_weekday(n, first, length) == day for n in self.dom_nearest)
            or (self.dom_last_weekday and day == _nearest_weekday(length, first, length))
        )
        in_dow = (
            weekday in self.dow
            or (weekday, (day - 1) // 7 + 1) in self.dow_nth
            or (weekday in self.dow_last and day + 7 > length)
        )
        return (in_dom or in_dow) if self.either_day else (in_dom and in_dow)

    def next_wall(self, wall: int, before: int | None = None) -> int | None:
        """The first wall time at or after ``wall`` that the fields select, or None past year 9999 (or, with
        ``before``, when there is none before that wall time: the search stops at its month)."""
        stop = (LAST_YEAR, 12) if before is None else _year_month(before)
        days, rest = divmod(wall, 86400)
        day = date.fromordinal(days + _EPOCH)
        year, month, dom = day.year, day.month, day.day
        hour, rest = divmod(rest, 3600)
        minute, second = divmod(rest, 60)
        while (year, month) <= stop:
            days_here = self.days(year, month) if month in self.months else ()
            index = bisect_left(days_here, dom)
            if index == len(days_here):  # no day left this month: the next one
                month, dom, hour, minute, second = month + 1, 1, 0, 0, 0
                if month > 12:
                    year, month = year + 1, 1
                continue
            if days_here[index] != dom:
                dom, hour, minute, second = days_here[index], 0, 0, 0
            index = bisect_left(self.hours, hour)
            if index == len(self.hours):
                dom, hour, minute, second = dom + 1, 0, 0, 0
                continue
            if self.hours[index] != hour:
                hour, minute, second = self.hours[index], 0, 0
            index = bisect_left(self.minutes, minute)
            if index == len(self.minutes):
                hour, minute, second = hour + 1, 0, 0
                continue
            if self.minutes[index] != minute:
                minute, second = self.minutes[index], 0
            index = bisect_left(self.seconds, second)
            if index == len(self.seconds):
                minute, second = minute + 1, 0
                continue
            second = self.seconds[index]
            ordinal = date(year, month, dom).toordinal() - _EPOCH
            found = ordinal * 86400 + hour * 3600 + minute * 60 + second
            return found if before is None or found < before else None
        return None


def _year_month(wall: int) -> tuple[int, int]:
    day = date.fromordinal(wall // 86400 + _EPOCH)
    return day.year, day.month


def _nearest_weekday(day: int, first: int, length: int) -> int | None:
    """``dayW``: the Monday-to-Friday day nearest ``day`` without leaving the month (None if the month is
    shorter than ``day``). A Saturday moves to Friday (or to Monday the 3rd if it is the 1st), a Sunday to
    Monday (or to Friday if it is the month's last day)."""
    if day > length:
        return None
    weekday = (first + day - 1) % 7
    if weekday == 6:
        return day - 1 if day > 1 else day + 2
    if weekday == 0:
        return day + 1 if day < length else day - 2
    return day


def wall_datetime(wall: int) -> datetime:
    """Wall seconds as a naive datetime."""
    return _WALL_ZERO + timedelta(seconds=wall)


def parse(expr: str) -> CronExpr:
    """Parse and check an expression; ``InvalidJob`` says which field is wrong and why."""
    if not expr.isascii():
        bad = next(c for c in expr if not c.isascii())
        raise InvalidJob(f"cron takes ASCII only, not {bad!r} (U+{ord(bad):04X})", field="schedule.expr")
    text = " ".join(_BLANKS.split(expr.strip(" \t\r\n")))
    if text.startswith("@"):
        if text.lower() not in DESCRIPTORS:
            raise InvalidJob(
                f"unknown cron descriptor {text[:40]!r}; known: {', '.join(DESCRIPTORS)}", field="schedule.expr"
            )
        text = DESCRIPTORS[text.lower()]
    parts = text.split(" ") if text else []
    if len(parts) != 6:
        raise InvalidJob(
            f"cron needs 6 fields (second minute hour day-of-month month day-of-week), got {len(parts)}",
            field="schedule.expr",
        )
    second, minute, hour, dom, month, dow = (part.upper() for part in parts)
    seconds = _values("second", second)
    minutes = _values("minute", minute)
    hours = _values("hour", hour)
    months = _values("month", month, _MONTHS)
    dom_plain, dom_last, dom_nearest, dom_last_weekday = _dom(dom)
    dow_plain, dow_nth, dow_last = _dow(dow)
    starred = dom[0] in "*?" or dow[0] in "*?"
    parsed = CronExpr(
        text=text,
        seconds=tuple(sorted(seconds)),
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        months=frozenset(months),
        dom=frozenset(dom_plain),
        dom_last=frozenset(dom_last),
        dom_nearest=frozenset(dom_nearest),
        dom_last_weekday=dom_last_weekday,
        dow=frozenset(dow_plain),
        dow_nth=frozenset(dow_nth),
        dow_last=frozenset(dow_last),
        either_day=not starred,
    )
    if not _ever_fires(parsed):
        raise InvalidJob(
            f"cron {text!r} never fires: no month it names has a day its day fields select", field="schedule.expr"
        )
    return parsed


def _ever_fires(parsed: CronExpr) -> bool:
    # A month's days depend only on its length and the weekday of its 1st, and every pair occurs in the
    # Gregorian calendar (February with 29 days and each weekday within 28 years): probe each pair.
    for month in parsed.months:
        lengths = (28, 29) if month == 2 else (monthrange(2026, month)[1],)
        for length in lengths:
            for first in range(7):
                if any(parsed._day(day, first, length) for day in range(1, length + 1)):
                    return True
    return False


def _number(name: str, token: str, names: dict[str, int] | None, low: int, high: int, item: str) -> int:
    if token.isdigit() and token.isascii():
        if len(token) > 4:
            raise _error(name, f"{item!r} has a number out of range {low}-{high}")
        value = int(token)
    elif names is not None and token in names:
        value = names[token]
    elif token in ("R", "H"):
        raise _error(name, f"{item!r}: random (R) and hashed (H) values are not a schedule and are not supported")
    else:
        raise _error(name, f"{token!r} in {item!r} is not a number{' or a name' if names else ''}")
    if not low <= value <= high:
        raise _error(name, f"{value} in {item!r} is out of range {low}-{high}")
    return value


def _values(name: str, text: str, names: dict[str, int] | None = None) -> set[int]:
    """The values of a numeric field: ``*``, ``n``, ``a-b`` (wrapping when a > b), ``/step``, lists.
    Day-of-week takes 0-7, but ``*`` and an open ``a/step`` run to 6: ``1/2`` is Monday, Wednesday, Friday."""
    low, top = _BOUNDS.get(name, (0, 7))
    open_top = 6 if name == "day-of-week" else top
    if text == "?":
        raise _error(name, "'?' is only for day-of-month and day-of-week")
    values: set[int] = set()
    for item in text.split(","):
        match = _ITEM.fullmatch(item)
        if not item or match is None:
            raise _error(name, f"{item!r} is not a value, a range or a step")
        start, end, step = match.group("start"), match.group("end"), match.group("step")
        if start == "*":
            if end is not None:
                raise _error(name, f"{item!r}: '*' cannot start a range")
            first, last = low, open_top
        else:
            first = _number(name, start, names, low, top, item)
            last = _number(name, end, names, low, top, item) if end is not None else (open_top if step else first)
        if name == "day-of-week" and first == 7 and last != 7:  # a range or step from 7 starts on Sunday, 0
            first = 0
        stride = 1
        if step is not None:
            stride = int(step) if len(step) <= 4 else 0
            if stride < 1:
                raise _error(name, f"{item!r}: the step must be a whole number from 1 to 9999")
        if first <= last:
            run = list(range(first, last + 1))
        else:  # a range that wraps past the field's end: 22-2 is 22, 23, 0, 1, 2
            run = list(range(first, open_top + 1)) + list(range(low, last + 1))
        values.update(run[::stride])
    return values


_DOM_LAST = re.compile(r"L(?:-([0-9]{1,2}))?")
_DOM_NEAREST = re.compile(r"([0-9]{1,2})W")


def _dom(text: str) -> tuple[set[int], set[int], set[int], bool]:
    name = "day-of-month"
    if text == "?":
        return set(range(1, 32)), set(), set(), False
    plain: set[int] = set()
    last: set[int] = set()
    nearest: set[int] = set()
    last_weekday = False
    for item in text.split(","):
        if item == "LW":
            last_weekday = True
        elif match := _DOM_LAST.fullmatch(item):
            back = int(match.group(1) or 0)
            if back > 30:
                raise _error(name, f"{item!r}: L-n counts back at most 30 days")
            last.add(back)
        elif match := _DOM_NEAREST.fullmatch(item):
            day = int(match.group(1))
            if not 1 <= day <= 31:
                raise _error(name, f"{item!r}: nW needs a day from 1 to 31")
            nearest.add(day)
        elif "L" in item or "W" in item:
            raise _error(name, f"{item!r}: use L, L-n, nW or LW on their own, not inside a range")
        else:
            plain |= _values(name, item)
    return plain, last, nearest, last_weekday


_DOW_NTH = re.compile(r"([A-Z0-9]+)#([0-9]+)")
_DOW_LAST = re.compile(r"([A-Z0-9]+)L|L([A-Z0-9]+)")


def _dow(text: str) -> tuple[set[int], set[tuple[int, int]], set[int]]:
    name = "day-of-week"
    if text == "?":
        return set(range(7)), set(), set()
    plain: set[int] = set()
    nth: set[tuple[int, int]] = set()
    last: set[int] = set()
    for item in text.split(","):
        if match := _DOW_NTH.fullmatch(item):
            weekday = _number(name, match.group(1), _DAYS, 0, 7, item) % 7
            k = match.group(2)
            if not (len(k) == 1 and 1 <= int(k) <= 5):
                raise _error(name, f"{item!r}: n#k needs k from 1 to 5")
            nth.add((weekday, int(k)))
        elif match := _DOW_LAST.fullmatch(item):
            last.add(_number(name, match.group(1) or match.group(2), _DAYS, 0, 7, item) % 7)
        elif item == "L":
            raise _error(name, "'L' alone is not a weekday: write 5L (or FRIL) for the last Friday")
        else:
            plain |= {value % 7 for value in _values(name, item, _DAYS)}
    return plain, nth, last
