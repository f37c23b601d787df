"""TICKLOCK_CPUS: CPU numbers and ranges (``0,2-3``). Checked against a list built the other way round:
parts drawn as CPUs and ranges (overlapping, repeated, in any order, with blanks around them), whose union
is what the parse must give; and against what it must refuse, whatever else the list holds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ticklock.settings import MAX_CPU, cpu_list

CPU = st.integers(0, 300)
BLANK = st.sampled_from(["", " ", "  ", "\t"])


@st.composite
def cpu_lists(draw: st.DrawFn) -> tuple[str, set[int]]:
    """A list of CPUs and ranges, and the CPUs it names."""
    text, named = [], set()
    for _ in range(draw(st.integers(1, 6))):
        first, last = sorted((draw(CPU), draw(CPU)))
        part = str(first) if first == last and draw(st.booleans()) else f"{first}-{last}"
        text.append(draw(BLANK) + part + draw(BLANK))
        named |= set(range(first, last + 1))
    return ",".join(text), named


@given(cpu_lists())
def test_a_list_parses_to_the_cpus_it_names(case: tuple[str, set[int]]) -> None:
    text, named = case
    assert cpu_list(text) == tuple(sorted(named))


BAD_PARTS = st.one_of(
    st.tuples(CPU, CPU).filter(lambda r: r[0] > r[1]).map(lambda r: f"{r[0]}-{r[1]}"),  # a range backwards
    st.integers(MAX_CPU + 1, 10**30).map(str),  # past the highest CPU Linux numbers
    st.sampled_from(["", "-", "1-", "-1", "1.5", "0 1", "0-7:2", "N", "x", "1--2"]),  # not numbers and ranges
    st.sampled_from(["\u0660", "\uff10", "\U0001d7ce", "\u00b2", "1-\u0662"]),  # digits, but not 0-9
)


@given(cpu_lists(), BAD_PARTS, st.booleans())
def test_a_bad_part_anywhere_is_refused_with_a_clear_message(case: tuple[str, set[int]], bad: str, first: bool) -> None:
    text = f"{bad},{case[0]}" if first else f"{case[0]},{bad}"
    with pytest.raises(ValueError, match=r"expected CPU numbers and ranges|a range runs from|CPUs are numbered 0 to"):
        cpu_list(text)


def test_a_list_as_long_as_a_variable_can_be_is_read_and_a_bad_part_after_it_refused_quoted_short() -> None:
    wide = ",".join(["0-8191"] * (128 * 1024 // 7))  # 128 KiB (Linux's limit for one variable) of wide ranges
    assert cpu_list(wide) == tuple(range(MAX_CPU + 1))
    text = wide + ",8192-12287"
    with pytest.raises(ValueError, match="CPUs are numbered 0 to 8191, got '8192-12287'") as info:
        cpu_list(text)
    assert len(str(info.value)) < 200


@pytest.mark.parametrize("blank", ["", " ", "\t"])
def test_an_empty_list_leaves_the_threads_where_the_os_runs_them(blank: str) -> None:
    assert cpu_list(blank) == ()
