"""Cron / interval / once schedules: parsing, validation, and the DST policy in the module docstring."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from ticklock.domain.schedules import (
    CronSchedule,
    IntervalSchedule,
    OnceSchedule,
    Schedule,
    next_fire,
    schedule_from_dict,
    schedule_to_dict,
)
from ticklock.errors import InvalidJob


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def after_(schedule: CronSchedule, moment: datetime) -> datetime:
    """next_after, which is None only past the year 9999."""
    found = schedule.next_after(moment)
    assert found is not None
    return found


def fires(schedule: CronSchedule, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` fires strictly after ``after``, chaining next_after as the engine does."""
    out: list[datetime] = []
    moment = after
    for _ in range(count):
        moment = after_(schedule, moment)
        out.append(moment)
    return out


# -- cron: fields, names, ranges, descriptors -----------------------------------------------------------


def test_cron_seconds_field_comes_first() -> None:
    every_15s = CronSchedule("*/15 * * * * *")
    assert fires(every_15s, utc(2026, 1, 1, 0, 0, 7), 3) == [
        utc(2026, 1, 1, 0, 0, 15),
        utc(2026, 1, 1, 0, 0, 30),
        utc(2026, 1, 1, 0, 0, 45),
    ]
    at_second_30 = CronSchedule("30 0 0 * * *")
    assert at_second_30.next_after(utc(2026, 1, 1)) == utc(2026, 1, 1, 0, 0, 30)


def test_cron_next_after_is_strictly_after() -> None:
    daily = CronSchedule("0 0 0 * * *")
    assert daily.next_after(utc(2026, 1, 1)) == utc(2026, 1, 2)
    assert daily.first_after(utc(2026, 1, 1)) == utc(2026, 1, 2)


def test_cron_month_and_weekday_names_and_ranges() -> None:
    weekdays_q1_noon = CronSchedule("0 0 12 * JAN-MAR MON-FRI")
    # 2026-01-01 is a Thursday: Thu, Fri, then Monday the 5th.
    assert fires(weekdays_q1_noon, utc(2026, 1, 1), 3) == [
        utc(2026, 1, 1, 12),
        utc(2026, 1, 2, 12),
        utc(2026, 1, 5, 12),
    ]
    # After the last weekday of March comes the first weekday of next January (Friday 2027-01-01).
    assert weekdays_q1_noon.next_after(utc(2026, 3, 31, 12)) == utc(2027, 1, 1, 12)


def test_cron_result_is_aware_utc() -> None:
    result = after_(CronSchedule("0 0 9 * * *", "Asia/Tokyo"), utc(2026, 1, 1, 1))
    assert result.tzinfo is not None
    assert result.utcoffset() == timedelta(0)
    assert result == utc(2026, 1, 2, 0)  # 09:00 JST is 00:00 UTC


def test_cron_leap_day_only_expression_is_valid_and_finds_the_next_leap_year() -> None:
    leap = CronSchedule("0 0 0 29 2 *")
    assert leap.next_after(utc(2026, 1, 1)) == utc(2028, 2, 29)


@pytest.mark.parametrize(
    ("descriptor", "fields", "after", "expected"),
    [
        ("@yearly", "0 0 0 1 1 *", utc(2026, 1, 1), utc(2027, 1, 1)),
        ("@annually", "0 0 0 1 1 *", utc(2026, 1, 1), utc(2027, 1, 1)),
        ("@monthly", "0 0 0 1 * *", utc(2026, 1, 15), utc(2026, 2, 1)),
        ("@weekly", "0 0 0 * * 0", utc(2026, 1, 1), utc(2026, 1, 4)),  # Sunday
        ("@daily", "0 0 0 * * *", utc(2026, 1, 1, 5), utc(2026, 1, 2)),
        ("@midnight", "0 0 0 * * *", utc(2026, 1, 1, 5), utc(2026, 1, 2)),
        ("@hourly", "0 0 * * * *", utc(2026, 1, 1, 5, 30), utc(2026, 1, 1, 6)),
        ("@minutely", "0 * * * * *", utc(2026, 1, 1, 5, 30, 10), utc(2026, 1, 1, 5, 31)),
    ],
)
def test_cron_descriptors(descriptor: str, fields: str, after: datetime, expected: datetime) -> None:
    schedule = CronSchedule(descriptor)
    assert schedule.fields == fields
    assert schedule.next_after(after) == expected


def test_cron_descriptor_is_case_insensitive() -> None:
    assert CronSchedule("@HOURLY").fields == "0 0 * * * *"


def test_cron_unknown_descriptor_lists_the_known_ones() -> None:
    with pytest.raises(InvalidJob) as info:
        CronSchedule("@fortnightly")
    assert info.value.field == "schedule.expr"
    assert "@fortnightly" in info.value.message
    assert "@hourly" in info.value.message


@pytest.mark.parametrize(
    ("expr", "field_name"),
    [
        ("60 * * * * *", "second"),
        ("-1 * * * * *", "second"),
        ("*/0 * * * * *", "second"),
        ("x * * * * *", "second"),
        ("0 60 * * * *", "minute"),
        ("0 0 24 * * *", "hour"),
        ("0 0 25-26 * * *", "hour"),
        ("0 0 0 32 * *", "day-of-month"),
        ("0 0 0 0 * *", "day-of-month"),
        ("0 0 0 * 13 *", "month"),
        ("0 0 0 * 0 *", "month"),
        ("0 0 0 * FOO *", "month"),
        ("0 0 0 * * 8", "day-of-week"),
        ("0 0 0 * * FOO", "day-of-week"),
        ("0 0 0 * * MON-FOO", "day-of-week"),
    ],
)
def test_cron_invalid_field_is_named(expr: str, field_name: str) -> None:
    with pytest.raises(InvalidJob) as info:
        CronSchedule(expr)
    assert info.value.field == "schedule.expr"
    message = info.value.message
    assert f"field {field_name}:" in message, message
    # and no other field is blamed
    others = {"second", "minute", "hour", "day-of-month", "month", "day-of-week"} - {field_name}
    for other in others:
        assert f"field {other} " not in message


@pytest.mark.parametrize(("expr", "count"), [("* * * * *", 5), ("* * * * * * *", 7), ("0 0", 2), ("", 0)])
def test_cron_wrong_field_count(expr: str, count: int) -> None:
    with pytest.raises(InvalidJob) as info:
        CronSchedule(expr)
    assert info.value.field == "schedule.expr"
    assert "6 fields" in info.value.message
    if count:
        assert f"got {count}" in info.value.message


def test_cron_extra_whitespace_is_tolerated() -> None:
    assert CronSchedule("  0  0 0 * * *  ").fields == "0 0 0 * * *"


@pytest.mark.parametrize("expr", ["0 0 0 30 2 *", "0 0 0 31 4 *", "0 0 0 31 FEB *"])
def test_cron_that_never_fires_is_rejected(expr: str) -> None:
    with pytest.raises(InvalidJob) as info:
        CronSchedule(expr)
    assert info.value.field == "schedule.expr"
    assert "never fires" in info.value.message


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "Europe/Londres", "", "../etc/passwd", "utc+1"])
def test_cron_unknown_timezone(zone: str) -> None:
    with pytest.raises(InvalidJob) as info:
        CronSchedule("@daily", zone)
    assert info.value.field == "schedule.timezone"
    assert "timezone" in info.value.message


def test_cron_default_timezone_is_utc() -> None:
    assert CronSchedule("@daily").timezone == "UTC"


def test_cron_evaluated_in_its_timezone() -> None:
    london_9am = CronSchedule("0 0 9 * * *", "Europe/London")
    assert london_9am.next_after(utc(2026, 1, 10)) == utc(2026, 1, 10, 9)  # GMT
    assert london_9am.next_after(utc(2026, 7, 10)) == utc(2026, 7, 10, 8)  # BST
    new_york_9am = CronSchedule("0 0 9 * * *", "America/New_York")
    assert new_york_9am.next_after(utc(2026, 1, 10)) == utc(2026, 1, 10, 14)  # EST
    assert new_york_9am.next_after(utc(2026, 7, 10)) == utc(2026, 7, 10, 13)  # EDT


def test_schedules_that_differ_only_in_zone_gap_or_overlap_each_get_their_own_next_fire() -> None:
    # next_after remembers its answers (the jobs of a burst share a schedule and an instant): the whole
    # schedule is the key, so asking one after another for the same instant gives each its own answer
    before_jump = utc(2026, 3, 29, 0, 59, 59)
    assert [CronSchedule("0 30 1 * * *", zone).next_after(before_jump) for zone in ("UTC", "Europe/London")] == [
        utc(2026, 3, 29, 1, 30),
        utc(2026, 3, 29, 1, 0),
    ]
    assert [CronSchedule("0 30 1 * * *", "Europe/London", gap=g).next_after(before_jump) for g in ("jump", "skip")] == [
        utc(2026, 3, 29, 1, 0),
        utc(2026, 3, 30, 0, 30),
    ]
    first_pass = utc(2026, 10, 25, 0, 40)  # 01:40 BST, before the clocks go back to 01:00 GMT
    assert [
        CronSchedule("0 */20 1 * * *", "Europe/London", overlap=o).next_after(first_pass) for o in ("first", "both")
    ] == [utc(2026, 10, 26, 1, 0), utc(2026, 10, 25, 1, 0)]


# -- DST: Europe/London ----------------------------------------------------------------------------------
# 2026-03-29: 01:00 GMT (01:00 UTC) jumps to 02:00 BST. 2026-10-25: 02:00 BST (01:00 UTC) back to 01:00 GMT.


def test_london_spring_forward_daily_fire_in_the_gap_runs_when_clocks_jump() -> None:
    daily_0130 = CronSchedule("0 30 1 * * *", "Europe/London")
    assert fires(daily_0130, utc(2026, 3, 27, 12), 4) == [
        utc(2026, 3, 28, 1, 30),  # 01:30 GMT
        utc(2026, 3, 29, 1, 0),  # 01:30 does not exist: runs at the jump, 02:00 BST
        utc(2026, 3, 30, 0, 30),  # 01:30 BST from now on
        utc(2026, 3, 31, 0, 30),
    ]


def test_london_spring_forward_gap_fire_from_just_before_the_jump_and_not_again_after() -> None:
    daily_0130 = CronSchedule("0 30 1 * * *", "Europe/London")
    assert daily_0130.next_after(utc(2026, 3, 29, 0, 59, 59)) == utc(2026, 3, 29, 1, 0)
    assert daily_0130.next_after(utc(2026, 3, 29, 1, 0)) == utc(2026, 3, 30, 0, 30)


def test_london_spring_forward_several_fires_in_the_gap_collapse_into_one() -> None:
    quarter_hours_at_1 = CronSchedule("0 0,15,30,45 1 * * *", "Europe/London")
    assert fires(quarter_hours_at_1, utc(2026, 3, 28, 12), 3) == [
        utc(2026, 3, 29, 1, 0),
        utc(2026, 3, 30, 0, 0),
        utc(2026, 3, 30, 0, 15),
    ]


def test_london_spring_forward_every_20_minutes_loses_no_real_time() -> None:
    every_20m = CronSchedule("0 */20 * * * *", "Europe/London")
    assert fires(every_20m, utc(2026, 3, 29, 0, 30), 4) == [
        utc(2026, 3, 29, 0, 40),  # 00:40 GMT
        utc(2026, 3, 29, 1, 0),  # 02:00 BST
        utc(2026, 3, 29, 1, 20),
        utc(2026, 3, 29, 1, 40),
    ]


def test_london_fall_back_daily_fixed_hour_runs_once_at_first_occurrence() -> None:
    daily_0130 = CronSchedule("0 30 1 * * *", "Europe/London")
    assert fires(daily_0130, utc(2026, 10, 23, 12), 4) == [
        utc(2026, 10, 24, 0, 30),  # 01:30 BST
        utc(2026, 10, 25, 0, 30),  # first 01:30 (BST); the second one, 01:30 GMT = 01:30 UTC, is skipped
        utc(2026, 10, 26, 1, 30),  # 01:30 GMT
        utc(2026, 10, 27, 1, 30),
    ]


@pytest.mark.parametrize("after", [utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1, 0), utc(2026, 10, 25, 1, 29)])
def test_london_fall_back_second_pass_never_fires_a_fixed_hour_job(after: datetime) -> None:
    daily_0130 = CronSchedule("0 30 1 * * *", "Europe/London")
    assert daily_0130.next_after(after) == utc(2026, 10, 26, 1, 30)


def test_london_fall_back_fixed_hour_with_minute_steps_runs_first_pass_only() -> None:
    every_20m_in_hour_1 = CronSchedule("0 */20 1 * * *", "Europe/London")
    assert fires(every_20m_in_hour_1, utc(2026, 10, 24, 23, 50), 4) == [
        utc(2026, 10, 25, 0, 0),
        utc(2026, 10, 25, 0, 20),
        utc(2026, 10, 25, 0, 40),
        utc(2026, 10, 26, 1, 0),
    ]


def test_london_fall_back_every_20_minutes_fires_through_both_passes() -> None:
    every_20m = CronSchedule("0 */20 * * * *", "Europe/London")
    assert fires(every_20m, utc(2026, 10, 24, 23, 50), 8) == [
        utc(2026, 10, 25, 0, 0),  # 01:00 BST (first pass)
        utc(2026, 10, 25, 0, 20),
        utc(2026, 10, 25, 0, 40),
        utc(2026, 10, 25, 1, 0),  # 01:00 GMT (second pass)
        utc(2026, 10, 25, 1, 20),
        utc(2026, 10, 25, 1, 40),
        utc(2026, 10, 25, 2, 0),  # 02:00 GMT
        utc(2026, 10, 25, 2, 20),
    ]


def test_london_fall_back_hourly_fires_every_real_hour() -> None:
    hourly = CronSchedule("@hourly", "Europe/London")
    assert fires(hourly, utc(2026, 10, 24, 23, 30), 3) == [
        utc(2026, 10, 25, 0, 0),
        utc(2026, 10, 25, 1, 0),
        utc(2026, 10, 25, 2, 0),
    ]


# -- DST: America/New_York -------------------------------------------------------------------------------
# 2026-03-08: 02:00 EST (07:00 UTC) jumps to 03:00 EDT. 2026-11-01: 02:00 EDT (06:00 UTC) back to 01:00 EST.


def test_new_york_spring_forward_daily_fire_in_the_gap_runs_when_clocks_jump() -> None:
    daily_0230 = CronSchedule("0 30 2 * * *", "America/New_York")
    assert fires(daily_0230, utc(2026, 3, 6, 12), 4) == [
        utc(2026, 3, 7, 7, 30),  # 02:30 EST
        utc(2026, 3, 8, 7, 0),  # 02:30 does not exist: at the jump, 03:00 EDT
        utc(2026, 3, 9, 6, 30),  # 02:30 EDT
        utc(2026, 3, 10, 6, 30),
    ]


def test_new_york_spring_forward_every_20_minutes() -> None:
    every_20m = CronSchedule("0 */20 * * * *", "America/New_York")
    assert fires(every_20m, utc(2026, 3, 8, 6, 30), 4) == [
        utc(2026, 3, 8, 6, 40),
        utc(2026, 3, 8, 7, 0),
        utc(2026, 3, 8, 7, 20),
        utc(2026, 3, 8, 7, 40),
    ]


def test_new_york_fall_back_daily_fixed_hour_runs_once_at_first_occurrence() -> None:
    daily_0130 = CronSchedule("0 30 1 * * *", "America/New_York")
    assert fires(daily_0130, utc(2026, 10, 30, 12), 4) == [
        utc(2026, 10, 31, 5, 30),  # 01:30 EDT
        utc(2026, 11, 1, 5, 30),  # first 01:30 (EDT); 01:30 EST = 06:30 UTC is skipped
        utc(2026, 11, 2, 6, 30),  # 01:30 EST
        utc(2026, 11, 3, 6, 30),
    ]
    assert daily_0130.next_after(utc(2026, 11, 1, 5, 30)) == utc(2026, 11, 2, 6, 30)


def test_new_york_fall_back_every_20_minutes_fires_through_both_passes() -> None:
    every_20m = CronSchedule("0 */20 * * * *", "America/New_York")
    assert fires(every_20m, utc(2026, 11, 1, 4, 50), 8) == [
        utc(2026, 11, 1, 5, 0),  # 01:00 EDT
        utc(2026, 11, 1, 5, 20),
        utc(2026, 11, 1, 5, 40),
        utc(2026, 11, 1, 6, 0),  # 01:00 EST
        utc(2026, 11, 1, 6, 20),
        utc(2026, 11, 1, 6, 40),
        utc(2026, 11, 1, 7, 0),  # 02:00 EST
        utc(2026, 11, 1, 7, 20),
    ]


def test_dst_results_accept_a_non_utc_after() -> None:
    daily_0130 = CronSchedule("0 30 1 * * *", "Europe/London")
    after = datetime(2026, 3, 28, 12, tzinfo=ZoneInfo("America/New_York"))  # 16:00 UTC
    assert daily_0130.next_after(after) == utc(2026, 3, 29, 1, 0)


# -- interval ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seconds", [1, 5, 86400])
def test_interval_next_is_after_plus_seconds(seconds: int) -> None:
    schedule = IntervalSchedule(seconds)
    start = utc(2026, 1, 1, 12, 0, 0)
    assert schedule.first_after(start) == start + timedelta(seconds=seconds)
    assert schedule.next_after(start) == start + timedelta(seconds=seconds)
    assert next_fire(schedule, now=start) == start + timedelta(seconds=seconds)


@pytest.mark.parametrize("seconds", [0, -1, 1.5, 2.0, True, False, "5", None])
def test_interval_rejects_anything_but_whole_seconds_at_least_one(seconds: Any) -> None:
    with pytest.raises(InvalidJob) as info:
        IntervalSchedule(seconds)
    assert info.value.field == "schedule.seconds"


# -- once -------------------------------------------------------------------------------------------------


def test_once_rejects_a_naive_datetime() -> None:
    with pytest.raises(InvalidJob) as info:
        OnceSchedule(datetime(2026, 6, 1, 12))
    assert info.value.field == "schedule.at"


def test_once_is_converted_to_utc() -> None:
    paris_noon = datetime(2026, 6, 1, 12, tzinfo=ZoneInfo("Europe/Paris"))
    schedule = OnceSchedule(paris_noon)
    assert schedule.at == utc(2026, 6, 1, 10)
    assert schedule.at.utcoffset() == timedelta(0)
    assert schedule.at.tzinfo is UTC
    offset = OnceSchedule(datetime(2026, 6, 1, 12, tzinfo=timezone(timedelta(hours=-5))))
    assert offset.at == utc(2026, 6, 1, 17)


def test_once_first_is_its_instant_then_it_is_disabled() -> None:
    at = utc(2026, 6, 1, 10)
    schedule: Schedule = OnceSchedule(at)
    assert schedule.first_after(utc(2026, 1, 1)) == at
    assert schedule.next_after(at) is None
    assert schedule.next_after(utc(2025, 1, 1)) is None
    assert next_fire(schedule, now=at) is None


# -- round trip -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schedule",
    [
        CronSchedule("0 0 12 * JAN-MAR MON-FRI", "Europe/London"),
        CronSchedule("@hourly"),
        CronSchedule("*/5 * * * * *", "America/New_York"),
        IntervalSchedule(1),
        IntervalSchedule(3600),
        OnceSchedule(datetime(2026, 6, 1, 12, 30, 15, 123456, tzinfo=ZoneInfo("Asia/Tokyo"))),
    ],
)
def test_schedule_dict_round_trip(schedule: Schedule) -> None:
    data = schedule_to_dict(schedule)
    assert data["kind"] == schedule.kind
    back = schedule_from_dict(data)
    assert back == schedule
    assert type(back) is type(schedule)
    assert schedule_to_dict(back) == data


def test_schedule_to_dict_shapes() -> None:
    assert schedule_to_dict(CronSchedule("@daily", "Europe/London")) == {
        "kind": "cron",
        "expr": "@daily",
        "timezone": "Europe/London",
        "gap": "jump",
        "overlap": "auto",
    }
    skip_both = CronSchedule("@daily", "Europe/London", gap="skip", overlap="both")
    assert schedule_from_dict(schedule_to_dict(skip_both)) == skip_both
    # a document stored before the DST choices existed reads with the defaults
    assert schedule_from_dict({"kind": "cron", "expr": "@daily"}) == CronSchedule("@daily", "UTC", "jump", "auto")
    assert schedule_to_dict(IntervalSchedule(30)) == {"kind": "interval", "seconds": 30}
    once = schedule_to_dict(OnceSchedule(utc(2026, 6, 1, 10)))
    assert once["kind"] == "once"
    assert datetime.fromisoformat(once["at"]) == utc(2026, 6, 1, 10)
    assert datetime.fromisoformat(once["at"]).utcoffset() == timedelta(0)


def test_schedule_from_dict_cron_defaults_to_utc() -> None:
    assert schedule_from_dict({"kind": "cron", "expr": "@daily"}) == CronSchedule("@daily", "UTC")


def test_schedule_from_dict_unknown_kind() -> None:
    with pytest.raises(InvalidJob) as info:
        schedule_from_dict({"kind": "weekly"})
    assert info.value.field == "schedule.kind"


def test_schedule_from_dict_validates() -> None:
    with pytest.raises(InvalidJob):
        schedule_from_dict({"kind": "cron", "expr": "0 60 * * * *"})
    with pytest.raises(InvalidJob):
        schedule_from_dict({"kind": "interval", "seconds": 0})
    with pytest.raises(InvalidJob):
        schedule_from_dict({"kind": "once", "at": "2026-06-01T10:00:00"})


# -- issue 10, finding 5: a range whose ends are equal is that one value (croniter 7.0.0 widened it) --------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("0 0 9-9 * * *", ["2026-01-01T09:00:00", "2026-01-02T09:00:00", "2026-01-03T09:00:00"]),
        ("5-5 0 9 * * *", ["2026-01-01T09:00:05", "2026-01-02T09:00:05", "2026-01-03T09:00:05"]),
        ("0 0 0 * * MON-MON", ["2026-01-05T00:00:00", "2026-01-12T00:00:00", "2026-01-19T00:00:00"]),
        ("0 0 0 * * mon-Mon", ["2026-01-05T00:00:00", "2026-01-12T00:00:00", "2026-01-19T00:00:00"]),
        ("0 0 9-9/2 * * *", ["2026-01-01T09:00:00", "2026-01-02T09:00:00", "2026-01-03T09:00:00"]),
        ("0 0 09-9,11-11 * * *", ["2026-01-01T09:00:00", "2026-01-01T11:00:00", "2026-01-02T09:00:00"]),
        ("0 0 0 1-1 JAN-JAN *", ["2027-01-01T00:00:00", "2028-01-01T00:00:00", "2029-01-01T00:00:00"]),
    ],
)
def test_a_single_value_range_means_that_value(expr: str, expected: list[str]) -> None:
    schedule = CronSchedule(expr)
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    got = []
    for _ in expected:
        moment = after_(schedule, moment)
        got.append(moment.replace(tzinfo=None).isoformat())
    assert got == expected
    assert schedule.expr == expr  # the job keeps the expression as written


# -- issue 10, finding 1: a fixed-hour job with many fires in the repeated hour skips the second pass whole ---


@pytest.mark.parametrize(
    ("expr", "zone", "after", "expected"),
    [
        ("0 */5 1 * * *", "Europe/London", "2026-10-25T00:55:00", ["2026-10-26T01:00:00", "2026-10-26T01:05:00"]),
        ("* * 1 * * *", "Europe/London", "2026-10-25T00:59:58", ["2026-10-25T00:59:59", "2026-10-26T01:00:00"]),
        ("*/1 * 1 * * *", "America/New_York", "2026-11-01T05:59:58", ["2026-11-01T05:59:59", "2026-11-02T06:00:00"]),
        ("0 * 1 * * *", "Australia/Lord_Howe", "2026-04-04T14:58:00", ["2026-04-04T14:59:00", "2026-04-05T14:30:00"]),
    ],
)
def test_the_second_pass_of_a_fixed_hour_is_skipped_whole(
    expr: str, zone: str, after: str, expected: list[str]
) -> None:
    schedule = CronSchedule(expr, zone)
    moment = datetime.fromisoformat(after).replace(tzinfo=UTC)
    got = []
    for _ in expected:
        moment = after_(schedule, moment)
        got.append(moment.replace(tzinfo=None).isoformat())
    assert got == expected
