"""A schedule in words, as the dashboard and the CLI show it beside the expression as written.

Read from the parsed expression (the sets of values each field selects), not from its text, so that
``*/15``, ``0/15`` and ``0,15,30,45`` all read "every 15 seconds". Common shapes get a sentence ("every 5
minutes", "at 09:30:00 on Monday to Friday", "on the last day of the month at 00:00:00"); any other
reads field by field ("at second 0, 30 of minute 0-10 of hour 9-17"), never wrong, at worst plain.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC
from functools import lru_cache

from ticklock.domain import cron
from ticklock.domain.schedules import CronSchedule, IntervalSchedule, OnceSchedule, Schedule

_CLOCK = re.compile(r"at \d\d:\d\d:\d\d")  # a time part that names times of day
_DAY_NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip


@lru_cache(maxsize=4096)
def describe(schedule: Schedule) -> str:
    """The schedule as a sentence (schedules are frozen values, most jobs share a few: each said once)."""
    if isinstance(schedule, IntervalSchedule):
        return f"every {duration(schedule.seconds)}, from the end of the previous run"
    if isinstance(schedule, OnceSchedule):
        return f"once, at {schedule.at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
    assert isinstance(schedule, CronSchedule)
    text = cron_words(cron.parse(schedule.expr))
    return text if schedule.timezone == "UTC" else f"{text}, {schedule.timezone} time"


def duration(seconds: int) -> str:
    """``90`` -> "1 minute 30 seconds"; ``3600`` -> "hour"; ``7200`` -> "2 hours"."""
    parts = []
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute"), (1, "second")):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {unit}{'s' if count > 1 else ''}")
    if len(parts) == 1 and parts[0].startswith("1 "):
        return parts[0][2:]
    return " ".join(parts)


def cron_words(parsed: cron.CronExpr) -> str:
    time = _time(parsed.seconds, parsed.minutes, parsed.hours)
    days = _days(parsed)
    months = "" if len(parsed.months) == 12 else f" in {_months(sorted(parsed.months))}"
    if days:
        return f"{time} on {days}{months}"
    if _CLOCK.match(time) and not months:
        return f"{time} every day"
    return f"{time}{months}"


def _step(values: Sequence[int], size: int) -> int | None:
    """n when ``values`` are 0, n, 2n... and n divides the field (every n); 1 when they are all of it."""
    if len(values) == size:
        return 1
    if len(values) < 2 or values[0] != 0:
        return None
    gap = values[1] - values[0]
    # only a step that divides the field is "every n" (``*/7`` seconds is 0, 7... 56, then 0: a gap of 4)
    return gap if size % gap == 0 and tuple(values) == tuple(range(0, size, gap)) else None


def _time(seconds: Sequence[int], minutes: Sequence[int], hours: Sequence[int]) -> str:
    s_step, m_step, h_step = _step(seconds, 60), _step(minutes, 60), _step(hours, 24)
    if m_step == 1 and h_step == 1 and s_step is not None:
        return "every second" if s_step == 1 else f"every {s_step} seconds"
    if len(seconds) == 1:
        (s,) = seconds
        at_second = f" at second {s}" if s else ""
        if h_step == 1 and m_step is not None:
            return ("every minute" if m_step == 1 else f"every {m_step} minutes") + at_second
        if len(minutes) == 1:
            (m,) = minutes
            past = (f" at minute {m}" + (f", second {s}" if s else "")) if m or s else ""
            if h_step is not None:
                return ("every hour" if h_step == 1 else f"every {h_step} hours") + past
            if len(hours) <= 6:
                return "at " + _join([f"{h:02d}:{m:02d}:{s:02d}" for h in hours])
            runs = _runs(list(hours))
            if len(runs) == 1:
                return f"every hour from {runs[0][0]:02d}:{m:02d}:{s:02d} to {runs[0][1]:02d}:{m:02d}:{s:02d}"
            return f"every hour of {_numbers(hours)}{past or ', on the hour'}"
    if h_step == 1 and len(minutes) == 60:
        return f"at second {_numbers(seconds)} of every minute"
    return f"at second {_numbers(seconds)} of minute {_numbers(minutes)} of hour {_numbers(hours)}"


def _days(parsed: cron.CronExpr) -> str:
    month_days: list[str] = []
    if len(parsed.dom) < 31 or parsed.dom_last or parsed.dom_nearest or parsed.dom_last_weekday:
        if parsed.dom:
            month_days.append(f"day {_numbers(sorted(parsed.dom))}")
        back = sorted(parsed.dom_last)
        month_days += [f"the day {n} days before the last day" if n else "the last day" for n in back]
        month_days += [f"the weekday nearest day {n}" for n in sorted(parsed.dom_nearest)]
        month_days += ["the last weekday"] if parsed.dom_last_weekday else []
    week_days: list[str] = []
    nth = [f"the {_ordinal(k)} {_DAY_NAMES[d]}" for d, k in sorted(parsed.dow_nth, key=lambda p: (p[1], p[0]))]
    last = [f"the last {_DAY_NAMES[d]}" for d in sorted(parsed.dow_last)]
    if len(parsed.dow) < 7 or nth or last:
        if parsed.dow:
            week_days.append(_weekdays(sorted(parsed.dow)))
        week_days += nth + last
    of_month = f"{_join(month_days)} of the month" if month_days else ""
    week = _join(week_days) + ("" if month_days else " of the month") if nth or last else _join(week_days)
    return " or ".join(p for p in (of_month, week) if p)


def _weekdays(days: list[int]) -> str:
    if days == [1, 2, 3, 4, 5]:
        return "Monday to Friday"
    if days == [0, 6]:
        return "Saturday and Sunday"
    runs = _runs(days)
    return _join([_DAY_NAMES[a] if a == b else f"{_DAY_NAMES[a]} to {_DAY_NAMES[b]}" for a, b in runs])


def _months(months: list[int]) -> str:
    runs = _runs(months)
    names = [_MONTH_NAMES[a - 1] if a == b else f"{_MONTH_NAMES[a - 1]} to {_MONTH_NAMES[b - 1]}" for a, b in runs]
    return _join(names)


def _numbers(values: Sequence[int]) -> str:
    """``0, 5-9, 30``: the values with runs of three or more as ranges."""
    parts = []
    for a, b in _runs(list(values)):
        parts += [str(a)] if a == b else [f"{a}, {b}"] if b == a + 1 else [f"{a}-{b}"]
    return ", ".join(parts)


def _runs(values: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for value in values:
        if runs and value == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], value)
        else:
            runs.append((value, value))
    return runs


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def _ordinal(n: int) -> str:
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n, 'th') }"
