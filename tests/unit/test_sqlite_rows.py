"""The SQLite store reads an execution's row by position (``execution_from_row``: the overview decodes its
sample of the latest runs, thousands): the same execution as the shared record every store reads makes of
it, rows from before a column (no jitter) included. ``tests/property/test_rows.py`` reads back what was
written, for any execution."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ticklock.adapters.store.sqlite.rows import execution_from_record_row, execution_from_row, us
from ticklock.domain.executions import ExecutionStatus
from ticklock.domain.fires import Trigger

AT = int(us(datetime(2026, 12, 1, 12, tzinfo=UTC)) or 0)


@pytest.mark.parametrize("status", list(ExecutionStatus))
@pytest.mark.parametrize("trigger", list(Trigger))
@pytest.mark.parametrize(
    ("finished_at", "duration", "error", "jitter", "detached"),
    [(None, None, None, None, 0), (AT + 5, 0.5, "boom", 1.25, 1), (AT, 0.0, "", 0.0, 0)],
)
def test_a_row_reads_the_same_by_position_and_by_record(
    status: ExecutionStatus,
    trigger: Trigger,
    finished_at: int | None,
    duration: float | None,
    error: str | None,
    jitter: float | None,
    detached: int,
) -> None:
    row = ("e1", "j1", "j1:x", "noop", trigger.value, AT, AT + 1, AT + 60, "tok", "me", status.value, 1, 0,
           finished_at, duration, error, jitter, detached)  # fmt: skip
    assert execution_from_row(row) == execution_from_record_row(row)
    assert execution_from_row(row).jitter == (jitter or 0.0) and execution_from_row(row).detached is bool(detached)
