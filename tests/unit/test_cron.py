"""The cron dialect (domain/cron.py), item by item, as the README's "Schedules and time" states it; and the
regression cases of issue 10's findings 2-4 (the DST ones are also pinned in tests/property)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ticklock.domain.schedules import CronSchedule
from ticklock.errors import InvalidJob


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[arg-type,misc]


def days(expr: str, after: datetime, count: int, zone: str = "UTC") -> list[str]:
    """The next ``count`` fires as 'Www YYYY-MM-DD HH:MM:SS' (UTC)."""
    schedule = CronSchedule(expr, zone)
    out, moment = [], after
    for _ in range(count):
        found = schedule.next_after(moment)
        assert found is not None
        out.append(found.strftime("%a %Y-%m-%d %H:%M:%S"))
        moment = found
    return out


# 2026-01-01 is a Thursday. January 2026: Sat 3, Sun 4, Mon 5; Sat 31. February 2026 starts on a Sunday.
START = utc(2025, 12, 31, 23, 59, 59)


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        # day-of-month specials
        ("0 0 0 L * *", ["Sat 2026-01-31 00:00:00", "Sat 2026-02-28 00:00:00", "Tue 2026-03-31 00:00:00"]),
        ("0 0 0 L-3 * *", ["Wed 2026-01-28 00:00:00", "Wed 2026-02-25 00:00:00", "Sat 2026-03-28 00:00:00"]),
        ("0 0 0 LW * *", ["Fri 2026-01-30 00:00:00", "Fri 2026-02-27 00:00:00", "Tue 2026-03-31 00:00:00"]),
        # 3 Jan 2026 is a Saturday: 3W is Friday the 2nd; 1 Feb is a Sunday: 1W is Monday the 2nd
        ("0 0 0 3W * *", ["Fri 2026-01-02 00:00:00", "Tue 2026-02-03 00:00:00", "Tue 2026-03-03 00:00:00"]),
        ("0 0 0 1W 2 *", ["Mon 2026-02-02 00:00:00", "Mon 2027-02-01 00:00:00", "Tue 2028-02-01 00:00:00"]),
        # 1 Aug 2026 is a Saturday: 1W goes forward to Monday the 3rd, not back into July
        ("0 0 0 1W 8 *", ["Mon 2026-08-03 00:00:00", "Mon 2027-08-02 00:00:00", "Tue 2028-08-01 00:00:00"]),
        # 31 May 2026 is a Sunday and the month's last day: 31W goes back to Friday the 29th
        ("0 0 0 31W 5 *", ["Fri 2026-05-29 00:00:00", "Mon 2027-05-31 00:00:00", "Wed 2028-05-31 00:00:00"]),
        ("0 0 0 31W * *", ["Fri 2026-01-30 00:00:00", "Tue 2026-03-31 00:00:00", "Fri 2026-05-29 00:00:00"]),
        ("0 0 0 1,L * *", ["Thu 2026-01-01 00:00:00", "Sat 2026-01-31 00:00:00", "Sun 2026-02-01 00:00:00"]),
        # day-of-week specials
        ("0 0 0 * * 5L", ["Fri 2026-01-30 00:00:00", "Fri 2026-02-27 00:00:00", "Fri 2026-03-27 00:00:00"]),
        ("0 0 0 * * L5", ["Fri 2026-01-30 00:00:00", "Fri 2026-02-27 00:00:00", "Fri 2026-03-27 00:00:00"]),
        ("0 0 0 * * FRIL", ["Fri 2026-01-30 00:00:00", "Fri 2026-02-27 00:00:00", "Fri 2026-03-27 00:00:00"]),
        ("0 0 0 * * 5#3", ["Fri 2026-01-16 00:00:00", "Fri 2026-02-20 00:00:00", "Fri 2026-03-20 00:00:00"]),
        ("0 0 0 * * THU#5", ["Thu 2026-01-29 00:00:00", "Thu 2026-04-30 00:00:00", "Thu 2026-07-30 00:00:00"]),
        ("0 0 0 * * 1#1,5L", ["Mon 2026-01-05 00:00:00", "Fri 2026-01-30 00:00:00", "Mon 2026-02-02 00:00:00"]),
        # 0 and 7 are both Sunday; a range may end at 7; from 7 a range or step starts on Sunday
        ("0 0 0 * * 7", ["Sun 2026-01-04 00:00:00", "Sun 2026-01-11 00:00:00", "Sun 2026-01-18 00:00:00"]),
        ("0 0 0 * * 5-7", ["Fri 2026-01-02 00:00:00", "Sat 2026-01-03 00:00:00", "Sun 2026-01-04 00:00:00"]),
        ("0 0 0 * * 7-1", ["Sun 2026-01-04 00:00:00", "Mon 2026-01-05 00:00:00", "Sun 2026-01-11 00:00:00"]),
        ("0 0 0 * * 7/3", ["Sat 2026-01-03 00:00:00", "Sun 2026-01-04 00:00:00", "Wed 2026-01-07 00:00:00"]),
        ("0 0 0 * * 1/2", ["Fri 2026-01-02 00:00:00", "Mon 2026-01-05 00:00:00", "Wed 2026-01-07 00:00:00"]),
        # ranges that wrap
        ("0 0 0 * * FRI-MON", ["Fri 2026-01-02 00:00:00", "Sat 2026-01-03 00:00:00", "Sun 2026-01-04 00:00:00"]),
        ("0 0 0 * * FRI-MON/2", ["Fri 2026-01-02 00:00:00", "Sun 2026-01-04 00:00:00", "Fri 2026-01-09 00:00:00"]),
        ("0 0 22-1 * * *", ["Thu 2026-01-01 00:00:00", "Thu 2026-01-01 01:00:00", "Thu 2026-01-01 22:00:00"]),
        ("0 0 0 30-2 * *", ["Thu 2026-01-01 00:00:00", "Fri 2026-01-02 00:00:00", "Fri 2026-01-30 00:00:00"]),
        ("0 0 0 1 NOV-FEB *", ["Thu 2026-01-01 00:00:00", "Sun 2026-02-01 00:00:00", "Sun 2026-11-01 00:00:00"]),
        ("50-10/10 0 0 * * *", ["Thu 2026-01-01 00:00:00", "Thu 2026-01-01 00:00:10", "Thu 2026-01-01 00:00:50"]),
        # steps: from a start, past the field (only the start), in a range
        ("5/20 0 0 * * *", ["Thu 2026-01-01 00:00:05", "Thu 2026-01-01 00:00:25", "Thu 2026-01-01 00:00:45"]),
        ("*/100 0 0 * * *", ["Thu 2026-01-01 00:00:00", "Fri 2026-01-02 00:00:00", "Sat 2026-01-03 00:00:00"]),
        ("0 0 9-17/4 * * *", ["Thu 2026-01-01 09:00:00", "Thu 2026-01-01 13:00:00", "Thu 2026-01-01 17:00:00"]),
        # lower case, names, and whitespace
        ("0 0 12 * jan,Mar sat", ["Sat 2026-01-03 12:00:00", "Sat 2026-01-10 12:00:00", "Sat 2026-01-17 12:00:00"]),
        ("  0\t0  12 1 * ?  ", ["Thu 2026-01-01 12:00:00", "Sun 2026-02-01 12:00:00", "Sun 2026-03-01 12:00:00"]),
    ],
)
def test_the_dialect(expr: str, expected: list[str]) -> None:
    assert days(expr, START, len(expected)) == expected


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        # both day fields restricted: either may match (the 1st, and every Monday)
        ("0 0 0 1 * MON", ["Thu 2026-01-01 00:00:00", "Mon 2026-01-05 00:00:00", "Mon 2026-01-12 00:00:00"]),
        ("0 0 0 L * 5#1", ["Fri 2026-01-02 00:00:00", "Sat 2026-01-31 00:00:00", "Fri 2026-02-06 00:00:00"]),
        # a field starting with * or ? is not a restriction to OR with: both must match (odd-day Mondays)
        ("0 0 0 */2 * MON", ["Mon 2026-01-05 00:00:00", "Mon 2026-01-19 00:00:00", "Mon 2026-02-09 00:00:00"]),
        ("0 0 0 1 * */2", ["Thu 2026-01-01 00:00:00", "Sun 2026-02-01 00:00:00", "Sun 2026-03-01 00:00:00"]),
        ("0 0 0 ? * MON", ["Mon 2026-01-05 00:00:00", "Mon 2026-01-12 00:00:00", "Mon 2026-01-19 00:00:00"]),
        ("0 0 0 13 * ?", ["Tue 2026-01-13 00:00:00", "Fri 2026-02-13 00:00:00", "Fri 2026-03-13 00:00:00"]),
        ("0 0 0 13 * *", ["Tue 2026-01-13 00:00:00", "Fri 2026-02-13 00:00:00", "Fri 2026-03-13 00:00:00"]),
    ],
)
def test_day_of_month_and_day_of_week_combine_as_in_crontab5(expr: str, expected: list[str]) -> None:
    assert days(expr, START, len(expected)) == expected


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ("? * * * * *", "field second: '?' is only for day-of-month and day-of-week"),
        ("0 0 0 * * L", "field day-of-week: 'L' alone is not a weekday"),
        ("0 0 0 L-31 * *", "L-n counts back at most 30 days"),
        ("0 0 0 0W * *", "nW needs a day from 1 to 31"),
        ("0 0 0 32W * *", "nW needs a day from 1 to 31"),
        ("0 0 0 1-LW * *", "use L, L-n, nW or LW on their own"),
        ("0 0 0 * * 5#6", "n#k needs k from 1 to 5"),
        ("0 0 0 * * 5#0", "n#k needs k from 1 to 5"),
        ("0 0 0 * * 8#1", "8 in '8#1' is out of range 0-7"),
        ("*/0 * * * * *", "the step must be a whole number from 1 to 9999"),
        ("*/99999 * * * * *", "the step must be a whole number from 1 to 9999"),
        ("*-5 * * * * *", "'*' cannot start a range"),
        ("1--2 * * * * *", "is not a value, a range or a step"),
        ("1,,2 * * * * *", "'' is not a value, a range or a step"),
        ("\u0663 * * * * *", "cron takes ASCII only, not '\u0663' (U+0663)"),
        ("0 0 0 * * \u017fun", "cron takes ASCII only"),
        ("0\u00a00 0 * * * *", "cron takes ASCII only"),
        ("0 0 0 * * *\x1c1", "is not a value, a range or a step"),  # not a separator, as str.split has it
        ("99999 * * * * *", "out of range 0-59"),
        ("0 0 0 1 JANUARY *", "'JANUARY' in 'JANUARY' is not a number or a name"),
        ("0 0 MON * * *", "field hour: 'MON' in 'MON' is not a number"),
        ("0 0 0 * * R", "field day-of-week: 'R': random (R) and hashed (H) values are not a schedule"),
        ("H 0 0 * * *", "field second: 'H': random (R) and hashed (H) values are not a schedule"),
        ("H(0-5) 0 0 * * *", "field second: 'H(0-5)' is not a value, a range or a step"),
        ("@reboot", "unknown cron descriptor '@reboot'"),
        ("0 0 0 30 2 *", "never fires"),
        ("0 0 0 31 4,6,9,11 *", "never fires"),
        ("0 0 0 L-29 2 *", "never fires"),
        ("0 0 0 30W 2 *", "never fires"),
    ],
)
def test_what_the_dialect_refuses_and_why(expr: str, fragment: str) -> None:
    with pytest.raises(InvalidJob) as info:
        CronSchedule(expr)
    assert info.value.field == "schedule.expr"
    assert fragment in info.value.message, info.value.message


def test_a_rare_but_possible_day_is_accepted_and_found() -> None:
    # the fifth Friday of February: only in a leap year whose February starts on a Friday
    assert days("0 0 0 ? 2 5#5", START, 2) == ["Fri 2036-02-29 00:00:00", "Fri 2064-02-29 00:00:00"]


def test_the_last_possible_fire_then_none() -> None:
    yearly = CronSchedule("@yearly")
    assert yearly.next_after(utc(9998, 6, 1)) == utc(9999, 1, 1)
    assert yearly.next_after(utc(9999, 1, 1)) is None
    assert yearly.upcoming(utc(9998, 6, 1), 5)[0].at == utc(9999, 1, 1)
    assert len(yearly.upcoming(utc(9998, 6, 1), 5)) == 1


def test_instants_with_a_fraction_of_a_second() -> None:
    every = CronSchedule("* * * * * *")
    assert every.next_after(utc(2026, 1, 1).replace(microsecond=999_999)) == utc(2026, 1, 1, 0, 0, 1)
    assert every.next_after(utc(2026, 1, 1).replace(microsecond=1)) == utc(2026, 1, 1, 0, 0, 1)


# -- issue 10, findings 2-4 ------------------------------------------------------------------------------


def test_finding_2_an_hour_star_job_fires_at_the_jump_for_its_missing_slot() -> None:
    half_past = CronSchedule("0 30 * * * *", "Europe/London")
    assert [f.at for f in half_past.upcoming(utc(2026, 3, 29, 0, 0), 3)] == [
        utc(2026, 3, 29, 0, 30),
        utc(2026, 3, 29, 1, 0),  # 01:30 GMT does not exist: it runs as the clocks jump to 02:00 BST
        utc(2026, 3, 29, 1, 30),
    ]
    hourly = CronSchedule("@hourly", "Australia/Lord_Howe")  # 02:00 +10:30 jumps to 02:30 +11:00
    fires = hourly.upcoming(utc(2026, 10, 3, 14, 0), 3)
    assert [f.at for f in fires] == [utc(2026, 10, 3, 14, 30), utc(2026, 10, 3, 15, 30), utc(2026, 10, 3, 16, 0)]
    assert fires[1].change == "gap" and fires[1].scheduled == datetime(2026, 10, 4, 2, 0)


def test_finding_3_a_gap_fire_runs_at_the_jump_not_late_by_its_seconds() -> None:
    assert CronSchedule("30 30 1 * * *", "Europe/London").next_after(utc(2026, 3, 28, 12)) == utc(2026, 3, 29, 1, 0)


def test_finding_4_an_every_hour_job_fires_through_a_30_minute_second_pass() -> None:
    # Lord Howe falls back from 02:00 +11:00 to 01:30 +10:30 (2026-04-04T15:00Z): 01:40 happens twice
    fires = CronSchedule("0 */20 * * * *", "Australia/Lord_Howe").upcoming(utc(2026, 4, 4, 14, 30), 3)
    assert [(f.at, f.change) for f in fires] == [
        (utc(2026, 4, 4, 14, 40), "overlap-first"),
        (utc(2026, 4, 4, 15, 10), "overlap-second"),
        (utc(2026, 4, 4, 15, 30), None),
    ]


@pytest.mark.parametrize("hours", ["*", "*/1", "0-23", "0-11,12-23", "12-11"])
def test_auto_overlap_reads_the_hour_field_as_a_set(hours: str) -> None:
    assert CronSchedule(f"0 0 {hours} * * *", "Europe/London").both_passes


@pytest.mark.parametrize("hours", ["1", "0-22", "*/2"])
def test_auto_overlap_is_first_pass_for_any_other_hours(hours: str) -> None:
    assert not CronSchedule(f"0 0 {hours} * * *", "Europe/London").both_passes


def test_the_per_job_choices() -> None:
    at_0130 = "0 30 1 * * *"
    spring = utc(2026, 3, 28, 12)
    assert CronSchedule(at_0130, "Europe/London", gap="skip").next_after(spring) == utc(2026, 3, 30, 0, 30)
    autumn = utc(2026, 10, 24, 12)
    both = CronSchedule(at_0130, "Europe/London", overlap="both").upcoming(autumn, 3)
    assert [f.at for f in both] == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1, 30), utc(2026, 10, 26, 1, 30)]
    first = CronSchedule("0 30 * * * *", "Europe/London", overlap="first").upcoming(utc(2026, 10, 25, 0, 0), 3)
    assert [f.at for f in first] == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 2, 30), utc(2026, 10, 25, 3, 30)]


@pytest.mark.parametrize(("gap", "overlap"), [("jump", "dst"), ("later", "auto")])
def test_unknown_choices_are_refused(gap: str, overlap: str) -> None:
    with pytest.raises(InvalidJob):
        CronSchedule("@daily", "Europe/London", gap=gap, overlap=overlap)
