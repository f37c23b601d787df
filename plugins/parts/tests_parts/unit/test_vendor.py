"""The vendor client's Retry-After reading."""

from __future__ import annotations

from ticklock_parts.adapters.catalogue.vendor import retry_after


def test_retry_after_as_seconds_or_a_date() -> None:
    assert retry_after("12") == 12.0
    assert retry_after(None) == 60.0
    assert retry_after("soon") == 60.0
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: no wait
