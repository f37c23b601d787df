"""The system clock reads whole milliseconds of the wall clock, aware, in UTC."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ticklock.clock import SystemClock, to_ms


def test_the_system_clock_is_the_wall_clock_in_whole_milliseconds() -> None:
    before = to_ms(datetime.now(UTC))
    now = SystemClock().now()
    after = datetime.now(UTC)
    assert now.tzinfo is UTC and now.microsecond % 1000 == 0
    assert before <= now <= after


@settings(max_examples=2000, deadline=None)
@given(ms=st.integers(0, 4_102_444_799_999) | st.sampled_from([0, 999, 2**31 * 1000 + 7]), ns=st.integers(0, 999_999))
def test_the_system_clock_reads_any_millisecond_exactly(ms: int, ns: int) -> None:
    # through 2100 (4_102_444_799_999 is its last millisecond), wherever in the millisecond the clock is
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(time, "time_ns", lambda: ms * 1_000_000 + ns)
        now = SystemClock().now()
    assert now == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
