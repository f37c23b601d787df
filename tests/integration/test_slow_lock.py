"""``ticklock serve``'s wiring with a Redis lock whose round trips are slow (a real Redis behind a proxy
that holds each request ``DELAY``): the dispatcher learns what its own hand-overs cost a fire, the lock's
round trips included, and stops keeping hand-overs past a batch that would hold it up; the workers run
them.

Every second, ``BURST`` cron jobs fire on one instant: one hand-over of more than a batch. With the pace
still unknown (0), the dispatcher keeps it and runs the fires itself; each of its fires then costs at least
two round trips (the lock's ``SET`` and its release), ``2 * DELAY``, so once the pace has come up,
``BURST`` fires count past the caller's budget and the whole hand-over goes to the workers. What is
asserted is where fires ran and that each ran once (counts, not timings); the delay is a floor, so a slow
machine only brings the switch sooner. A burst of ``BURST`` fires at the floor takes ~30 ms, under the
relief's 50 ms: the dispatcher is not relieved for it, and a relief (on a stall of this machine) hands the
rest of one hand-over to a thread of its own, not a worker, so it cannot pass for the pace at work.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

from tests.support.delay_proxy import DelayProxy
from tests.support.factories import make_job
from tests.support.waiting import wait_until
from ticklock.adapters.queue.local import BATCH
from ticklock.domain.schedules import CronSchedule
from ticklock.handlers.builtin import register as register_builtin
from ticklock.handlers.registry import HandlerContext, Registry
from ticklock.runtimes.local import LocalService
from ticklock.settings import Settings

DELAY = 0.0005  # seconds each request to Redis is held: a fire's lock costs 1 ms at least
BURST = 24  # fires on each second's instant: more than a batch (16)
SECONDS = 12  # bursts watched


def test_a_slow_locks_hand_overs_past_a_batch_go_to_the_workers_once_the_dispatcher_has_timed_its_own(
    tmp_path: Path, redis_url: str
) -> None:
    ran: list[tuple[datetime, str]] = []  # (the fire's slot, the thread that ran it)
    registry = Registry()
    register_builtin(registry)

    def where(ctx: HandlerContext) -> None:
        ran.append((ctx.scheduled_at, threading.current_thread().name))

    registry.register("where", where)
    redis = urlsplit(redis_url)
    assert BATCH < BURST
    with DelayProxy(redis.port or 6379, DELAY) as proxy:
        settings = Settings.load(
            {"TICKLOCK_DB": str(tmp_path / "serve.db"), "TICKLOCK_LOCK": f"redis://127.0.0.1:{proxy.port}/0"},
            plugins=(),
        )
        service = LocalService(settings, registry=registry)
        try:
            first = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
            every_second = CronSchedule("* * * * * *")
            jobs = [make_job(f"b{i}", schedule=every_second, handler="where", next_run_at=first) for i in range(BURST)]
            service.store.add_jobs(jobs)
            service.start()
            last = first + timedelta(seconds=SECONDS - 1)
            assert wait_until(lambda: sum(1 for slot, _ in ran if slot == last) == BURST, timeout=SECONDS + 30)
            time.sleep(0.2)  # nothing more of those seconds comes
        finally:
            service.stop()
        pace = service.pool.caller_pace
    by_second: dict[datetime, list[str]] = {}
    for slot, thread in ran:
        by_second.setdefault(slot, []).append(thread)
    seconds = [first + timedelta(seconds=s) for s in range(SECONDS)]
    # every fire of every second once
    assert [len(by_second.get(at, [])) for at in seconds] == [BURST] * SECONDS, by_second
    kept = [sum(name == "ticklock-dispatcher" for name in by_second[at]) for at in seconds]
    to_workers = [sum(name.startswith("ticklock-worker-") for name in by_second[at]) for at in seconds]
    # a hand-over is the dispatcher's or the workers', whole: a burst that was the dispatcher's ran there
    assert BURST in kept, (kept, to_workers)  # while the pace was unknown, the dispatcher kept a burst
    # and once it had timed its own, every burst went to the workers (a burst is met by then: each of the
    # dispatcher's bursts moves the pace an eighth of the way up to its fires' cost, >= 2 * DELAY)
    assert to_workers[-4:] == [BURST] * 4, (kept, to_workers)
    assert pace * BURST > service.pool._caller_budget, pace  # what _fits compares
