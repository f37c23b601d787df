"""The cron engine against the brute-force oracle in tests/support/cron_oracle.py (which shares no code
with it): pinned at every clock change of 2026-2030 in thirteen zones chosen for their shapes, and
property-based (hypothesis) over generated expressions, zones, DST choices and instants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache, partial

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from tests.support.cron_oracle import Oracle, clock_changes
from ticklock.domain.schedules import CronSchedule
from ticklock.errors import InvalidJob

# Each zone stands for a shape of clock change.
ZONES = {
    "Europe/London": "one hour, at 01:00 UTC, northern",
    "America/New_York": "one hour, at 02:00 local",
    "Australia/Sydney": "one hour, southern hemisphere",
    "Australia/Lord_Howe": "a 30-minute shift",
    "Antarctica/Troll": "a two-hour shift",
    "America/Santiago": "southern, at midnight (24:00 -> 23:00, 00:00 -> 01:00)",
    "America/Havana": "at midnight in the north",
    "Pacific/Chatham": "+12:45 / +13:45, at 02:45 local",
    "Europe/Dublin": "winter time is tzdata's 'negative' DST",
    "Africa/Casablanca": "Ramadan 2026: back, then forward on a moving date; +00 from September (tzdata 2026)",
    "Asia/Gaza": "changes on dates set by the lunar calendar",
    "America/St_Johns": "a -03:30 zone",
    "Asia/Kolkata": "no changes, a half-hour offset",
}
EXPRESSIONS = [
    "* * * * * *",
    "*/20 * * * * *",
    "0 */5 * * * *",
    "0 30 * * * *",
    "0 0 * * * *",
    "0 */20 0-23 * * *",
    "30 30 1 * * *",
    "0 */5 1 * * *",
    "0 0 2 * * *",
    "15 45 2 * * *",
    "0 0 0 * * *",
    "0 30 23 * * *",
    "0 0 0 L * *",
    "0 0 3 * * SUN",
    "0 30 1 ? 3 0L",  # London's spring-forward day, in its gap, once a year
    "0 30 1 ? 10 0L",  # London's fall-back day, in its overlap
    "0 0 0 29 2 *",
]
POLICIES = [("jump", "auto"), ("skip", "first"), ("jump", "both"), ("skip", "both")]


def fires(next_after: object, after: datetime, count: int) -> list[datetime | None]:
    out: list[datetime | None] = []
    moment: datetime | None = after
    for _ in range(count):
        assert moment is not None
        moment = next_after(moment)  # type: ignore[operator]
        out.append(moment)
        if moment is None:
            break
    return out


@lru_cache(maxsize=64)
def changes(zone: str) -> list[tuple[datetime, timedelta, timedelta]]:
    return clock_changes(zone, 2026, 2030)


def test_the_zones_cover_the_shapes_the_issue_names() -> None:
    sizes = {abs(after - before) for zone in ZONES for _, before, after in changes(zone)}
    assert timedelta(minutes=30) in sizes and timedelta(hours=1) in sizes and timedelta(hours=2) in sizes
    midnight = [
        (zone, at) for zone in ZONES for at, before, _ in changes(zone) if (at + before).time().hour == 0
    ]  # changes whose pre-change wall clock reads midnight
    assert {zone for zone, _ in midnight} >= {"America/Santiago", "America/Havana"}
    assert len(changes("Africa/Casablanca")) >= 3 and not changes("Asia/Kolkata")


@pytest.mark.parametrize("zone", sorted(ZONES))
def test_every_clock_change_of_2026_to_2030_matches_the_oracle(zone: str) -> None:
    moments = [
        at + shift
        for at, before, after in changes(zone)
        for shift in (-timedelta(hours=1), -timedelta(seconds=1), abs(after - before) / 2)
    ] or [datetime(year, 6, 30, 23, 59, 59, tzinfo=UTC) for year in range(2026, 2031)]
    wrong = []
    for after in moments:
        for expr in EXPRESSIONS:
            for gap, overlap in POLICIES if expr in EXPRESSIONS[:8] else POLICIES[:1]:
                engine = fires(CronSchedule(expr, zone, gap, overlap).next_after, after, 2)
                oracle = fires(Oracle(expr, zone, gap, overlap).next_after, after, 2)
                if engine != oracle:
                    wrong.append(f"{expr!r} gap={gap} overlap={overlap} after {after}: {engine} != {oracle}")
    assert not wrong, "\n".join(wrong[:20])


# -- generated ------------------------------------------------------------------------------------------


def _numbers(low: int, high: int) -> st.SearchStrategy[str]:
    value = st.integers(low, high)
    step = st.integers(1, max(1, (high - low) // 2))
    return st.one_of(
        st.just("*"),
        value.map(str),
        st.tuples(value, value).map(lambda p: f"{p[0]}-{p[1]}"),
        step.map(lambda s: f"*/{s}"),
        st.tuples(value, step).map(lambda p: f"{p[0]}/{p[1]}"),
        st.tuples(value, value, step).map(lambda p: f"{p[0]}-{p[1]}/{p[2]}"),
        st.lists(value, min_size=2, max_size=4).map(lambda v: ",".join(map(str, v))),
    )


DAYS_OF_MONTH = st.one_of(
    st.sampled_from(["*", "?", "L", "L-2", "LW", "1", "15W", "1W", "31W", "*/2", "1,15", "25-5", "29", "31"]),
    _numbers(1, 31),
)
MONTHS = st.one_of(st.sampled_from(["*", "JAN-MAR", "NOV-FEB", "*/3", "2", "3,10", "OCT"]), _numbers(1, 12))
DAYS_OF_WEEK = st.one_of(
    st.sampled_from(["*", "?", "MON-FRI", "SUN", "7", "5-7", "FRI-MON", "FRI-MON/2", "1/2", "5#3", "1#5", "5L", "L0"]),
    _numbers(0, 7),
)
HOURS = st.one_of(st.sampled_from(["*", "*/1", "0-23", "1", "2", "0", "23", "1-3", "22-2"]), _numbers(0, 23))
EXPRS = st.tuples(_numbers(0, 59), _numbers(0, 59), HOURS, DAYS_OF_MONTH, MONTHS, DAYS_OF_WEEK).map(" ".join)


@st.composite
def instants(draw: st.DrawFn) -> tuple[datetime, str]:
    zone = draw(st.sampled_from(sorted(ZONES)))
    near = changes(zone)
    where = draw(st.sampled_from(["change", "change", "2026-2030", "2026-2030", "1900-2100", "edges"]))
    if where == "change" and near:
        at, _, _ = draw(st.sampled_from(near))
        moment = at + timedelta(seconds=draw(st.integers(-3 * 3600, 3 * 3600)))
    elif where == "1900-2100":
        moment = datetime(1900, 1, 1, tzinfo=UTC) + timedelta(seconds=draw(st.integers(0, 200 * 365 * 86400)))
    elif where == "edges":  # the first and last days the engine answers for
        first = datetime(1, 1, 2, tzinfo=UTC) + timedelta(seconds=draw(st.integers(0, 40 * 86400)))
        last = datetime(9999, 12, 30, tzinfo=UTC) - timedelta(seconds=draw(st.integers(0, 40 * 86400)))
        moment = draw(st.sampled_from([first, last]))
    else:
        moment = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=draw(st.integers(0, 5 * 365 * 86400)))
    return moment.replace(microsecond=draw(st.sampled_from([0, 0, 500_000, 999_999]))), zone


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(
    expr=EXPRS,
    moment=instants(),
    gap=st.sampled_from(["jump", "skip"]),
    overlap=st.sampled_from(["auto", "first", "both"]),
)
@example(
    expr="0 30 * * * *", moment=(datetime(2026, 3, 29, 0, 30, tzinfo=UTC), "Europe/London"), gap="jump", overlap="auto"
)
@example(
    expr="0 0 * * * *",
    moment=(datetime(2026, 10, 3, 14, 0, tzinfo=UTC), "Australia/Lord_Howe"),
    gap="jump",
    overlap="auto",
)
@example(
    expr="0 */20 * * * *",
    moment=(datetime(2026, 4, 4, 14, 40, tzinfo=UTC), "Australia/Lord_Howe"),
    gap="jump",
    overlap="auto",
)
@example(
    expr="* * * * * *",
    moment=(datetime(2026, 3, 29, 0, 59, 59, tzinfo=UTC), "Antarctica/Troll"),
    gap="jump",
    overlap="auto",
)
def test_generated_schedules_match_the_oracle(expr: str, moment: tuple[datetime, str], gap: str, overlap: str) -> None:
    after, zone = moment
    try:
        schedule = CronSchedule(expr, zone, gap, overlap)
    except InvalidJob as exc:
        refused = exc.message
    else:
        oracle = Oracle(expr, zone, gap, overlap)
        horizon = 366 * 30 if after.year < 9990 else 366 * 10
        assert fires(schedule.next_after, after, 3) == fires(partial(oracle.next_after, horizon_days=horizon), after, 3)
        return
    # refused only when no day could ever match: the generated fields are all in the dialect
    assert "never fires" in refused, refused
    assert Oracle(expr, zone, gap, overlap).next_after(after, horizon_days=366 * 8) is None
    assume(False)


@pytest.mark.parametrize(
    ("expr", "zone"),
    [
        ("0 30 2 ? 3 0#2", "America/New_York"),
        ("0 30 1 ? 3 0L", "Europe/London"),
        ("0 0 2 ? 10 0#1", "Australia/Sydney"),
    ],
)
def test_a_schedule_whose_every_match_falls_in_a_gap_never_fires_with_skip(expr: str, zone: str) -> None:
    """The US second Sunday of March at 02:30 never exists: with gap=skip the search stops (it searched to
    the year 9999 before) and says so; the oracle, looking thirty years ahead, finds nothing either."""
    after = datetime(2026, 1, 1, tzinfo=UTC)
    assert CronSchedule(expr, zone, gap="skip").next_after(after) is None
    assert Oracle(expr, zone, gap="skip").next_after(after) is None
    jumped = CronSchedule(expr, zone).next_after(after)
    assert jumped is not None and jumped == Oracle(expr, zone).next_after(after)


def test_an_instant_just_before_a_fire_centuries_away_keeps_its_microseconds() -> None:
    after = datetime(5000, 6, 1, 11, 59, 59, 999_999, tzinfo=UTC)
    expected = datetime(5000, 6, 1, 12, tzinfo=UTC)
    assert CronSchedule("0 0 12 * * *").next_after(after) == expected == Oracle("0 0 12 * * *").next_after(after)
