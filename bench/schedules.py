"""The cost of one ``CronSchedule.next_after`` per expression shape and zone (issue 10), beside
APScheduler 3's ``CronTrigger.get_next_fire_time`` for the shapes both can express.

Usage::

    .venv/bin/python bench/schedules.py [--random 40] [--years 2026,2027,2028,2029,2030] [--summary]

For each shape and zone: ``--random`` instants spread over the years, plus, for every clock change of
those years, the instants 1 s, 10 s, 1 min and 1 h before it and halfway through it. Each instant's cost
is the least of ``--repeat`` calls timed with ``time.perf_counter`` (these machines are shared: a pause
of theirs is not the search's), so p50/p99/max are warm figures; "cold" is a first call with every cache
emptied (the zone's clock changes are found then), also the least of ``--repeat``. As in ``timeit``, the
garbage collector is off while calls are timed. A call that raises is counted as an error. Target: max
under 5 ms for every accepted expression in every zone, cold calls included. Nothing asserts here: the
table is for a reader.
"""

from __future__ import annotations

import argparse
import gc
import platform
import random
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stats import percentile
from apscheduler.triggers.cron import CronTrigger

from ticklock.domain import schedules, zones
from ticklock.domain.schedules import CronSchedule

# (ticklock expression, APScheduler fields or None where APScheduler has no such expression)
SHAPES: list[tuple[str, dict[str, str] | None]] = [
    ("* * * * * *", {"second": "*"}),
    ("*/20 * * * * *", {"second": "*/20"}),
    ("0 * * * * *", {"second": "0"}),
    ("0 */20 * * * *", {"second": "0", "minute": "*/20"}),
    ("0 30 * * * *", {"second": "0", "minute": "30"}),
    ("0 0 * * * *", {"second": "0", "minute": "0"}),
    ("0 30 1 * * *", {"second": "0", "minute": "30", "hour": "1"}),
    ("30 30 1 * * *", {"second": "30", "minute": "30", "hour": "1"}),
    ("0 */5 1 * * *", {"second": "0", "minute": "*/5", "hour": "1"}),
    ("0 0 9 * * MON-FRI", {"second": "0", "minute": "0", "hour": "9", "day_of_week": "mon-fri"}),
    ("@daily", {"second": "0", "minute": "0", "hour": "0"}),
    ("0 0 0 L * *", {"second": "0", "minute": "0", "hour": "0", "day": "last"}),
    ("0 0 12 15W * *", None),
    ("0 0 0 * * 5#3", {"second": "0", "minute": "0", "hour": "0", "day": "3rd fri"}),
    ("0 0 0 29 2 *", {"second": "0", "minute": "0", "hour": "0", "day": "29", "month": "2"}),
    ("0 0 0 ? 2 5#5", {"second": "0", "minute": "0", "hour": "0", "day": "5th fri", "month": "2"}),
]
ZONES = [
    "UTC",
    "Europe/London",
    "America/New_York",
    "America/Santiago",  # changes at midnight, southern hemisphere
    "America/Havana",  # changes at midnight
    "Australia/Lord_Howe",  # a 30-minute shift
    "Antarctica/Troll",  # a two-hour shift
    "Pacific/Chatham",  # a 45-minute offset
    "Africa/Casablanca",  # Ramadan changes
    "Asia/Kolkata",  # no changes
]
TARGET_MAX_MS = 5.0


def transitions(zone: ZoneInfo, years: list[int]) -> list[tuple[datetime, timedelta]]:
    """(instant to the hour, size) of each change of ``zone``'s UTC offset during ``years``."""
    found = []
    moment = datetime(min(years), 1, 1, tzinfo=UTC)
    end = datetime(max(years) + 1, 1, 1, tzinfo=UTC)
    offset = moment.astimezone(zone).utcoffset()
    while moment < end:
        moment += timedelta(hours=1)
        now = moment.astimezone(zone).utcoffset()
        if now != offset:
            assert now is not None and offset is not None
            found.append((moment, abs(now - offset)))
            offset = now
    return found


def timed(
    call: Callable[[datetime], object],
    instants: list[datetime],
    repeat: int,
    before: Callable[[], object] = lambda: None,
) -> tuple[list[float], int]:
    """Each instant's cost: the least of ``repeat`` calls, so a pause of the machine's (these are shared)
    is not read as the search's; the worst instant is still the worst. ``before`` runs ahead of each call,
    untimed (ticklock's: forget the remembered answers, so that each call is a search, not a hit)."""
    costs: list[float] = []
    errors = 0
    for instant in instants:
        best = float("inf")
        for _ in range(repeat):
            before()
            began = time.perf_counter()
            try:
                call(instant)
            except Exception:  # noqa: BLE001 - counted: an accepted expression that cannot go on
                errors += 1
            best = min(best, time.perf_counter() - began)
        costs.append(best)
    return costs, errors // repeat


def cold_call(shape: str, name: str, instant: datetime, repeat: int) -> float:
    """The first call with every cache emptied, the least of ``repeat`` tries."""
    best = float("inf")
    for _ in range(repeat):
        zones._year_info.cache_clear()
        zones.timeline.cache_clear()
        schedules._parse.cache_clear()
        schedules._next_cached.cache_clear()
        gc.collect()
        began = time.perf_counter()
        CronSchedule(shape, name).next_after(instant)
        best = min(best, time.perf_counter() - began)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--random", type=int, default=40)
    parser.add_argument("--years", default="2026,2027,2028,2029,2030")
    parser.add_argument("--summary", action="store_true", help="one row per shape (its worst zone)")
    parser.add_argument("--repeat", type=int, default=3, help="calls per instant; the least counts")
    args = parser.parse_args()
    years = [int(y) for y in args.years.split(",")]
    rng = random.Random(20261201)
    start = datetime(min(years), 1, 1, tzinfo=UTC)
    span = (datetime(max(years) + 1, 1, 1, tzinfo=UTC) - start).total_seconds()
    rows = []
    gc.disable()
    for shape, peer_fields in SHAPES:
        for name in ZONES:
            instants = [start + timedelta(seconds=rng.uniform(0, span)) for _ in range(args.random)]
            for change, size in transitions(ZoneInfo(name), years):
                instants += [change - timedelta(seconds=s) for s in (1, 10, 60, 3600)] + [change + size / 2]
            cold = cold_call(shape, name, instants[0], args.repeat)
            schedule = CronSchedule(shape, name)
            costs, errors = timed(schedule.next_after, instants, args.repeat, schedules._next_cached.cache_clear)
            peer = None
            if peer_fields is not None:
                trigger = CronTrigger(timezone=ZoneInfo(name), **peer_fields)
                peer_costs, _ = timed(partial(trigger.get_next_fire_time, None), instants, args.repeat)
                peer = percentile(peer_costs, 50)
            rows.append((shape, name, len(instants), costs, cold, errors, peer))
    gc.enable()
    machine = f"{platform.node()}, {platform.processor() or platform.machine()}, Python {platform.python_version()}"
    title = f"{args.random} random instants + 5 around each clock change, {args.years}, least of {args.repeat}"
    print(f"\nCronSchedule.next_after, {title}; {machine}, {time.strftime('%Y-%m-%d')}\n")
    print("| expression | zone | calls | p50 ms | p99 ms | max ms | cold ms | errors | APScheduler p50 ms |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    if args.summary:
        worst: dict[str, tuple[str, int, list[float], float, int, float | None]] = {}
        for shape, name, calls, costs, cold, errors, peer in rows:
            if shape not in worst or max(*costs, cold) > max(*worst[shape][2], worst[shape][3]):
                worst[shape] = (f"{name} (worst of {len(ZONES)})", calls, costs, cold, errors, peer)
        rows = [
            (shape, name, calls, costs, cold, errors, peer)
            for shape, (name, calls, costs, cold, errors, peer) in worst.items()
        ]
    over = 0
    for shape, name, calls, costs, cold, errors, peer in rows:
        p50, p99 = ((percentile(costs, q) or 0.0) * 1000 for q in (50, 99))
        top = max(max(costs), cold) * 1000
        ok = top < TARGET_MAX_MS and not errors
        over += not ok
        peer_text = "—" if peer is None else f"{peer * 1000:.3f}"
        print(
            f"| `{shape}` | {name} | {calls} | {p50:.3f} | {p99:.3f} | {max(costs) * 1000:.3f} {'✓' if ok else '✗'}"
            f" | {cold * 1000:.2f} | {errors} | {peer_text} |"
        )
    print(f"\n{over} row(s) over the {TARGET_MAX_MS:g} ms target or with errors.")


if __name__ == "__main__":
    main()
