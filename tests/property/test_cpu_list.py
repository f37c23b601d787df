"""TICKLOCK_CPUS is a Linux CPU list (``0,2-3``). Checked against a list built the other way round: parts
drawn as CPUs and ranges (overlapping, repeated, in any order, with blanks around them), whose union is what
the parse must give; and a CPU this process may not run on is refused, named in the message."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ticklock.settings import cpu_list

ALLOWED = sorted(os.sched_getaffinity(0))
OUTSIDE = max(ALLOWED) + 1  # the first CPU past the ones this process may use (none past it may be either)


@st.composite
def parts(draw: st.DrawFn, cpus: list[int]) -> tuple[str, set[int]]:
    """A CPU list of ``cpus``' members and ranges between them, and the CPUs it names."""
    text, named = [], set()
    for _ in range(draw(st.integers(1, 6))):
        first = draw(st.sampled_from(cpus))
        last = draw(st.sampled_from(cpus).filter(lambda c, first=first: c >= first))
        wanted = set(range(first, last + 1))
        if not wanted <= set(cpus):  # a range over a CPU missing between two allowed ones: named one by one
            last = first
            wanted = {first}
        part = str(first) if first == last and draw(st.booleans()) else f"{first}-{last}"
        text.append(draw(st.sampled_from(["", " "])) + part + draw(st.sampled_from(["", " ", "  "])))
        named |= wanted
    return ",".join(text), named


@given(parts(ALLOWED))
def test_a_list_of_allowed_cpus_parses_to_the_cpus_it_names(case: tuple[str, set[int]]) -> None:
    text, named = case
    assert cpu_list(text) == tuple(sorted(named))


@given(parts(ALLOWED), st.integers(OUTSIDE, OUTSIDE + 64))
def test_a_cpu_this_process_may_not_use_is_refused_and_named(case: tuple[str, set[int]], outside: int) -> None:
    text = f"{case[0]},{outside}"
    with pytest.raises(ValueError, match=rf"CPU {outside} is not one this process may run on"):
        cpu_list(text)


@pytest.mark.parametrize("blank", ["", " ", "\t"])
def test_an_empty_list_leaves_the_threads_where_the_os_runs_them(blank: str) -> None:
    assert cpu_list(blank) == ()
