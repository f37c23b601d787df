"""The schedule in words says what the schedule does: its sentences are checked against the fires the
engine computes (which ``test_cron_oracle`` checks against an independent implementation)."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings

from tests.property.test_cron_oracle import EXPRS
from ticklock.domain.schedules import CronSchedule, IntervalSchedule, OnceSchedule, upcoming
from ticklock.domain.words import describe, duration
from ticklock.errors import InvalidJob

AFTER = datetime(2026, 6, 1, 12, 0, 7, tzinfo=UTC)
UNITS = {"second": 1, "minute": 60, "hour": 3600}
EVERY = re.compile(r"every (?:(\d+) )?(second|minute|hour)s?(?: at minute \d+(?:, second \d+)?| at second \d+)?")


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        ("* * * * * *", "every second"),
        ("*/15 * * * * *", "every 15 seconds"),
        ("0,15,30,45 * * * * *", "every 15 seconds"),
        ("*/7 * * * * *", "at second 0, 7, 14, 21, 28, 35, 42, 49, 56 of every minute"),
        ("0 * * * * *", "every minute"),
        ("30 */5 * * * *", "every 5 minutes at second 30"),
        ("0 0 * * * *", "every hour"),
        ("15 30 * * * *", "every hour at minute 30, second 15"),
        ("0 0 */2 * * *", "every 2 hours"),
        ("0 30 9 * * MON-FRI", "at 09:30:00 on Monday to Friday"),
        ("0 0 9,17 * * *", "at 09:00:00 and 17:00:00 every day"),
        ("0 0 9-17 * * *", "every hour from 09:00:00 to 17:00:00"),
        ("0 0 0 L * *", "at 00:00:00 on the last day of the month"),
        ("0 0 0 LW * *", "at 00:00:00 on the last weekday of the month"),
        ("0 0 0 15W * *", "at 00:00:00 on the weekday nearest day 15 of the month"),
        ("0 0 12 * * 5L", "at 12:00:00 on the last Friday of the month"),
        ("0 0 12 * * MON#2", "at 12:00:00 on the 2nd Monday of the month"),
        ("0 0 0 1 * MON", "at 00:00:00 on day 1 of the month or Monday"),
        ("0 0 0 * JAN-MAR SAT,SUN", "at 00:00:00 on Saturday and Sunday in January to March"),
        ("@daily", "at 00:00:00 every day"),
    ],
)
def test_common_shapes_read_as_a_person_would_say_them(expr: str, words: str) -> None:
    assert describe(CronSchedule(expr)) == words


def test_the_other_shapes_and_the_zone() -> None:
    assert describe(CronSchedule("0 30 1 * * *", "Europe/London")) == "at 01:30:00 every day, Europe/London time"
    assert describe(IntervalSchedule(90)) == "every 1 minute 30 seconds, from the end of the previous run"
    assert describe(OnceSchedule(datetime(2026, 12, 1, 10, tzinfo=UTC))) == "once, at 2026-12-01 10:00:00 UTC"
    assert [duration(s) for s in (1, 60, 3600, 7200, 86400 + 61)] == [
        "second", "minute", "hour", "2 hours", "1 day 1 minute 1 second"
    ]  # fmt: skip


def _valid(expr: str) -> CronSchedule | None:
    try:
        return CronSchedule(expr)
    except InvalidJob:
        return None


@settings(max_examples=400, deadline=None)
@given(EXPRS)
def test_every_valid_expression_has_words_and_what_they_claim_holds(expr: str) -> None:
    schedule = _valid(expr)
    if schedule is None:
        return
    words = describe(schedule)
    assert words and "None" not in words
    fires = [f.at for f in upcoming(schedule, after=AFTER, count=40)]
    if every := EVERY.fullmatch(words):
        step = int(every.group(1) or 1) * UNITS[every.group(2)]
        assert {(b - a).total_seconds() for a, b in itertools.pairwise(fires)} == {step}, words
    if at := re.fullmatch(r"at ([\d:, and]+) every day", words):
        times = set(re.findall(r"\d\d:\d\d:\d\d", at.group(1)))
        assert {f"{f:%H:%M:%S}" for f in fires} == times, words
        dates = sorted({f.date() for f in fires})
        assert all((b - a).days == 1 for a, b in itertools.pairwise(dates)), words
    if day := re.search(r" on (Monday to Friday|Saturday and Sunday)$", words):
        weekdays = {0, 1, 2, 3, 4} if day.group(1) == "Monday to Friday" else {5, 6}
        assert {f.weekday() for f in fires} <= weekdays, words


def test_the_words_catch_an_uneven_step() -> None:
    # */7 on seconds wraps with a gap of 4 (56 -> 0): not "every 7 seconds"
    fires = [f.at for f in upcoming(CronSchedule("*/7 * * * * *"), after=AFTER, count=12)]
    assert {(b - a).total_seconds() for a, b in itertools.pairwise(fires)} == {7.0, 4.0}
    assert "every 7" not in describe(CronSchedule("*/7 * * * * *"))
