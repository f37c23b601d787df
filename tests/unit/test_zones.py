"""domain/zones.py finds clock changes by sampling zoneinfo; here its answers are checked against the
transition table zoneinfo's pure-Python implementation reads from the same file, for every zone."""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources
from zoneinfo import ZoneInfo, _zoneinfo  # type: ignore[attr-defined]

import pytest

from ticklock.domain.zones import FIRST_INSTANT, LAST_INSTANT, Timeline

ZONES = resources.files("tzdata").joinpath("zones").read_text().split()


def _table(name: str, first: int, last: int) -> list[tuple[int, int, int]]:
    """(instant, offset before, offset after) for each offset change in [first, last], from the file's
    transitions and, past them, from zoneinfo itself asked at each year's rule changes."""
    zone = _zoneinfo.ZoneInfo.no_cache(name)
    out = []
    offsets = [int(t.utcoff.total_seconds()) for t in zone._ttinfos]
    previous = int(zone._tti_before.utcoff.total_seconds()) if zone._tti_before else offsets[0]
    for at, offset in zip(zone._trans_utc, offsets, strict=True):
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
        line, zone = Timeline(name), ZoneInfo(name)
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
