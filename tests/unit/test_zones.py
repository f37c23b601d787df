"""domain/zones.py finds clock changes by sampling zoneinfo; here its answers are checked against the
transition table zoneinfo's pure-Python implementation reads from the same file, for every zone."""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources
from zoneinfo import _zoneinfo  # type: ignore[attr-defined]

import pytest

from ticklock.domain.zones import FIRST_INSTANT, LAST_INSTANT, Timeline, load

ZONES = resources.files("tzdata").joinpath("zones").read_text().split()


def _table(name: str, first: int, last: int) -> list[tuple[int, int, int]]:
    """(instant, offset before, offset after) for each offset change in [first, last]: the file's listed
    transitions, then those of its closing rule (the POSIX TZ string the slim files end with), read the
    way zoneinfo's pure-Python implementation reads them."""
    with resources.files("tzdata").joinpath("zoneinfo", *name.split("/")).open("rb") as data:
        zone = _zoneinfo.ZoneInfo.from_file(data, key=name)  # the pinned data, as zones.load reads it
    seconds = [int(t.utcoff.total_seconds()) for t in zone._ttinfos]
    listed = list(zip(zone._trans_utc, seconds, strict=True))
    rule = zone._tz_after
    if isinstance(rule, _zoneinfo._TZStr):
        std, dst = int(rule.std.utcoff.total_seconds()), int(rule.dst.utcoff.total_seconds())
        end_of_list = listed[-1][0] if listed else first
        for year in range(datetime.fromtimestamp(max(end_of_list, first), UTC).year, 2038):
            on, off = rule.transitions(year)
            for at, offset in ((on - std, dst), (off - dst, std)):
                if at > end_of_list:
                    listed.append((at, offset))
        listed.sort()
    out = []
    previous = int(zone._tti_before.utcoff.total_seconds()) if zone._tti_before else seconds[0] if seconds else 0
    for at, offset in listed:
        if offset != previous and first <= at <= last:
            out.append((at, previous, offset))
        previous = offset
    return out


@pytest.mark.parametrize("chunk", range(8))
def test_changes_match_zoneinfos_own_table_in_every_zone(chunk: int) -> None:
    first = int(datetime(1970, 1, 1, tzinfo=UTC).timestamp())
    last = int(datetime(2037, 1, 1, tzinfo=UTC).timestamp())  # the files list transitions up to 2037
    wrong = []
    for name in ZONES[chunk::8]:
        line = Timeline(name)
        found = []
        moment = first - 1
        while (change := line.first_change(moment, last)) is not None:
            found.append((change.at, change.before, change.after))
            moment = change.at
        expected = _table(name, first, last)
        if found != expected:
            wrong.append(f"{name}: {set(found) ^ set(expected)}")
    assert not wrong, "\n".join(wrong[:10])


def test_offsets_match_zoneinfo_at_sampled_instants() -> None:
    for name in ("Europe/London", "Australia/Lord_Howe", "Antarctica/Troll", "Pacific/Apia", "America/Santiago"):
        line, zone = Timeline(name), load(name)
        for at in range(int(datetime(2010, 1, 1, tzinfo=UTC).timestamp()), int(datetime(2031, 1, 1).timestamp()), 7919):
            offset = datetime.fromtimestamp(at, zone).utcoffset()
            assert offset is not None and line.offset(at) == offset.total_seconds(), (name, at)


def test_a_change_exactly_at_the_year_boundary_belongs_to_the_new_year() -> None:
    # Pacific/Apia skipped 2011-12-30: the clocks went from 2011-12-29 23:59:59 -10:00 to 2011-12-31 00:00 +14
    line = Timeline("Pacific/Apia")
    change = line.first_change(int(datetime(2011, 12, 1, tzinfo=UTC).timestamp()), LAST_INSTANT)
    assert change is not None
    assert datetime.fromtimestamp(change.at, UTC) == datetime(2011, 12, 30, 10, tzinfo=UTC)
    assert (change.before, change.after) == (-10 * 3600, 14 * 3600) and change.forward and change.size == 86400


def test_the_first_and_last_years_answer() -> None:
    for name in ("UTC", "Europe/London", "Asia/Tokyo"):
        line = Timeline(name)
        assert isinstance(line.offset(FIRST_INSTANT), int)
        assert isinstance(line.offset(LAST_INSTANT), int)
        assert line.first_change(LAST_INSTANT - 86400, LAST_INSTANT) is None


def test_zones_come_from_the_pinned_tzdata_not_the_host() -> None:
    """Replicas must agree on when the clocks change: Debian's tzdata 2025b still has Morocco's Ramadan
    changes after 2026, the pinned tzdata 2026.6 does not (a newer pin may change this fact)."""
    casablanca = Timeline("Africa/Casablanca")
    after_2026 = casablanca.first_change(int(datetime(2026, 10, 1, tzinfo=UTC).timestamp()), LAST_INSTANT)
    assert after_2026 is None
    assert load("Europe/London") is load("Europe/London")  # read once
