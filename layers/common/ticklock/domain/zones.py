"""A timezone as a timeline of UTC offsets: the offset at any instant and the clock changes between two.

zoneinfo answers "what is the offset at this instant" but not "when does it next change". The cron
engine needs the second: inside a stretch of constant offset, wall time is UTC plus one number and the
cron fields can be searched directly; at a change it applies the gap and overlap rules. So a zone's
changes are found here by asking zoneinfo itself, one year at a time, cached:

* the offset is sampled every three days across the year (plus the second before it starts), and each
  sample that differs from the one before is narrowed to the exact second by halving;
* three days (72 hours) is safe because no two offset changes in the IANA database since 1900 are
  closer than 95 hours (Africa/Freetown, 1939; then 167 hours, Brazil in 2000), so two changes can
  never both fall between two samples and none can hide.
  ``tests/unit/test_zones.py`` checks every zone against zoneinfo's own transition table.

Zones are read from the pinned ``tzdata`` package, never from the host's ``/usr/share/zoneinfo``: two
replicas on machines with different system data would otherwise disagree on when the clocks change.
(A name only a host has, such as ``localtime``, is refused for new jobs; one stored before that rule
still loads from the host.)

Instants are whole seconds since the Unix epoch; everything here is a plain ``int``.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from importlib import resources
from zoneinfo import ZoneInfo

STEP = 3 * 86400
# Instants outside these bounds have no local time in every zone (datetime stops at years 1 and 9999).
FIRST_INSTANT = int(datetime(1, 1, 2, tzinfo=UTC).timestamp())
LAST_INSTANT = int(datetime(9999, 12, 30, tzinfo=UTC).timestamp())


@dataclass(frozen=True, slots=True)
class Change:
    """The clocks change at ``at``: the offset is ``before`` up to ``at - 1`` and ``after`` from ``at``."""

    at: int
    before: int
    after: int

    @property
    def forward(self) -> bool:
        """A spring-forward: the wall times from ``at + before`` up to ``at + after`` do not exist."""
        return self.after > self.before

    @property
    def size(self) -> int:
        return abs(self.after - self.before)


@dataclass(frozen=True, slots=True)
class _Year:
    base: int  # the offset in force as the year begins (before any change of the year)
    changes: tuple[Change, ...]
    starts: tuple[int, ...]  # the changes' instants, for bisect


@lru_cache(maxsize=1)
def known_zones() -> frozenset[str]:
    """The IANA names the pinned ``tzdata`` package lists."""
    return frozenset(resources.files("tzdata").joinpath("zones").read_text().split())


@lru_cache(maxsize=1024)
def load(name: str) -> ZoneInfo:
    """The zone as the pinned ``tzdata`` has it (a host-only name from the host). Raises
    ``ZoneInfoNotFoundError`` or ``ValueError`` for a name that is no zone."""
    if name not in known_zones():
        return ZoneInfo(name)
    with resources.files("tzdata").joinpath("zoneinfo", *name.split("/")).open("rb") as data:
        return ZoneInfo.from_file(data, key=name)


class Timeline:
    """The offsets of one IANA zone over time."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._zone = load(name)

    def offset(self, at: int) -> int:
        """The UTC offset in seconds at instant ``at``."""
        year = _year_of(at)
        info = _year_info(self.name, year)
        index = bisect_right(info.starts, at)
        return info.changes[index - 1].after if index else info.base

    def last_change(self, at: int) -> Change | None:
        """The latest change at or before ``at``, looking back into the previous year at most."""
        year = _year_of(at)
        for candidate in (year, year - 1):
            if candidate < 1:
                break
            info = _year_info(self.name, candidate)
            index = bisect_right(info.starts, at)
            if index:
                return info.changes[index - 1]
        return None

    def first_change(self, after: int, until: int) -> Change | None:
        """The earliest change with ``after < at <= until``, or None."""
        year, last = _year_of(after), _year_of(min(until, LAST_INSTANT))
        while year <= last:
            info = _year_info(self.name, year)
            index = bisect_right(info.starts, after)
            if index < len(info.changes):
                change = info.changes[index]
                return change if change.at <= until else None
            year += 1
        return None


@lru_cache(maxsize=1024)
def timeline(name: str) -> Timeline:
    return Timeline(name)


def _year_of(at: int) -> int:
    return datetime.fromtimestamp(min(max(at, FIRST_INSTANT), LAST_INSTANT), UTC).year


def _offset(zone: ZoneInfo, at: int) -> int:
    delta = datetime.fromtimestamp(at, zone).utcoffset()
    assert delta is not None
    return int(delta.total_seconds())


@lru_cache(maxsize=16384)
def _year_info(name: str, year: int) -> _Year:
    zone = timeline(name)._zone
    start = max(int(datetime(year, 1, 1, tzinfo=UTC).timestamp()), FIRST_INSTANT)
    end = int(datetime(year + 1, 1, 1, tzinfo=UTC).timestamp()) if year < 9999 else LAST_INSTANT
    end = min(end, LAST_INSTANT + 1)
    points = [start - 1, *range(start, end, STEP), end - 1]
    offsets = [_offset(zone, point) for point in points]
    changes = []
    for index in range(1, len(points)):
        low, high = points[index - 1], points[index]
        before, after = offsets[index - 1], offsets[index]
        if before == after:
            continue
        # the first second with the new offset lies in (low, high]: halve until it is found
        while high - low > 1:
            middle = (low + high) // 2
            if _offset(zone, middle) == before:
                low = middle
            else:
                high = middle
        changes.append(Change(at=high, before=before, after=after))
    return _Year(base=offsets[0], changes=tuple(changes), starts=tuple(c.at for c in changes))
