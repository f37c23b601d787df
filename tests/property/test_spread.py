"""The overview spreads a ledger entry's slots over its steps as if evenly spaced: checked against
placing each slot one by one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from ticklock.api.views import _spread

START = datetime(2026, 1, 1, 12, tzinfo=UTC)


@settings(max_examples=300, deadline=None)
@given(
    first=st.integers(-600, 3600),
    gap=st.integers(1, 400),
    count=st.integers(1, 60),
    step=st.sampled_from([10, 60, 300]),
)
def test_spread_matches_placing_each_slot(first: int, gap: int, count: int, step: int) -> None:
    width = timedelta(seconds=step)
    buckets: set[datetime] = {START + i * width for i in range(3600 // step)}
    counts: dict[datetime, dict[str, int]] = {b: {} for b in buckets}
    begin = START + timedelta(seconds=first)
    _spread(counts, "skipped", begin, begin + timedelta(seconds=gap * (count - 1)), count, START, width)
    expected: dict[datetime, int] = {}
    for k in range(count):
        at = begin + timedelta(seconds=gap * k)
        bucket = START + (at - START) // width * width
        if bucket in buckets:
            expected[bucket] = expected.get(bucket, 0) + 1
    assert {b: c["skipped"] for b, c in counts.items() if c} == expected
