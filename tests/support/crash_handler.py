"""The SIGKILL test's handler, loaded by ``ticklock serve`` as a handler module
(TICKLOCK_HANDLER_MODULES=tests.support.crash_handler).

Each run leaves files of its own in ``payload["dir"]``: ``<stem>.start`` as it starts and ``<stem>.end``
just before it returns, so that a run cut off by a kill is a start without an end. The stem names the run
alone, and says all the test reads of it: ``<job name>~<slot ms>~<start ns>~<pid>~<random>`` (creating
an empty file is one system call, so a kill leaves it there or not, never half-written).
"""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ticklock.handlers.contract import HandlerContext, Registry

NAME = "crash.record"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def slot_ms(at: datetime) -> int:
    return (at - _EPOCH) // timedelta(milliseconds=1)


def _touch(path: Path) -> None:
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))


def record(ctx: HandlerContext) -> None:
    """Mark the start, take payload.seconds (deaf to ``cancelled``: a shutdown lets it finish), mark the end."""
    folder = Path(ctx.payload["dir"])
    stem = f"{ctx.job_name}~{slot_ms(ctx.scheduled_at)}~{time.time_ns()}~{os.getpid()}~{uuid.uuid4().hex[:12]}"
    _touch(folder / f"{stem}.start")
    time.sleep(float(ctx.payload["seconds"]))
    _touch(folder / f"{stem}.end")


def register(registry: Registry) -> None:
    registry.register(NAME, record)
