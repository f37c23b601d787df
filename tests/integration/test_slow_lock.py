"""``ticklock serve``'s wiring with a Redis lock whose round trips are slow (a real Redis behind a proxy
that holds each request ``DELAY``): the dispatcher learns what its own hand-overs cost a fire, the lock's
round trips included, and stops keeping hand-overs past a batch that would hold it up; the workers run
them.

Every second, ``BURST`` cron jobs fire on one instant: one hand-over of more than a batch, which the
dispatcher keeps whole or hands to the workers whole. The first bursts go to the workers (a handler counts
as quick, and may be run by the dispatcher, after 20 quick runs); then, with the pace still unknown (0),
the dispatcher keeps a burst and runs it itself. Each of its fires costs at least two round trips (the
lock's ``SET`` and its release), ``2 * DELAY``, and each burst it keeps moves the pace an eighth of the
way there: at that floor, after six bursts ``BURST`` fires count past the caller's budget, and from then
on every burst goes to the workers (only the dispatcher's own hand-overs move the pace). What is asserted
is where fires ran and that each ran once: counts, not timings; the delay is a floor, so a slow machine
only brings the switch sooner. The test waits for the switch itself (a kept burst, then ``AFTER`` bursts
on the workers), so it does not depend on how many bursts that takes.
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
from ticklock.handlers.contract import HandlerContext, Registry
from ticklock.runtimes.local import LocalService
from ticklock.settings import Settings

DELAY = 0.0005  # seconds each request to Redis is held: a fire's lock costs 1 ms at least
BURST = 24  # fires on each second's instant: more than a batch (16)
AFTER = 4  # bursts on the workers after the switch, to be seen before stopping


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

    def bursts() -> list[tuple[int, int]]:
        """Each whole second so far, in order: (fires run by the dispatcher, fires run by the workers)."""
        by_second: dict[datetime, list[str]] = {}
        for slot, thread in list(ran):
            by_second.setdefault(slot, []).append(thread)
        seconds = sorted(by_second)[:-1]  # the newest may be under way
        return [
            (
                sum(name == "ticklock-dispatcher" for name in by_second[at]),
                sum(name.startswith("ticklock-worker-") for name in by_second[at]),
            )
            for at in seconds
        ]

    def switched() -> bool:
        seen = bursts()
        kept = [i for i, (dispatcher, _) in enumerate(seen) if dispatcher == BURST]
        return bool(kept) and len(seen) >= kept[0] + 1 + AFTER and seen[-AFTER:] == [(0, BURST)] * AFTER

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
            assert wait_until(switched, timeout=60), bursts()
        finally:
            service.stop()
        pace = service.pool.caller_pace
    time.sleep(0.1)
    seen = bursts()
    slots = sorted({slot for slot, _ in ran})
    # every second from the first one whole, each fire of it once (the last one may have been cut by the stop)
    assert slots[: len(seen)] == [first + timedelta(seconds=s) for s in range(len(seen))]
    assert sorted(slot for slot, _ in ran if slot < slots[len(seen)]) == sorted(slots[: len(seen)] * BURST)
    # each burst whole on one side; the dispatcher kept one while its pace was unknown, and from the first
    # burst it handed over after keeping one, every burst went to the workers
    assert all(burst in [(BURST, 0), (0, BURST)] for burst in seen), seen
    kept = seen.index((BURST, 0))
    spilled = seen.index((0, BURST), kept)
    assert seen[spilled:] == [(0, BURST)] * (len(seen) - spilled), seen
    assert pace * BURST > service.pool._caller_budget, pace  # what _fits compares
