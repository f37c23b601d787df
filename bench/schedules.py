"""The cost of one ``CronSchedule.next_after`` per expression shape and zone (issue 10).

Usage::

    .venv/bin/python bench/schedules.py [--random 40] [--years 2026,2027]

For each shape and zone: ``--random`` instants spread over the years, plus, for every clock change of
those years, the instants 1 s, 10 s, 1 min and 1 h before it (where the cost was seen). Each call is
timed with ``time.perf_counter``; a call that raises is counted as an error. Target: max under 5 ms
for every accepted expression in every zone. Nothing asserts here: the table is for a reader.
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stats import percentile

from ticklock.domain.schedules import CronSchedule

SHAPES = [
    "* * * * * *",
    "*/20 * * * * *",
    "0 * * * * *",
    "0 */20 * * * *",
    "0 30 * * * *",
    "0 0 * * * *",
    "0 30 1 * * *",
    "30 30 1 * * *",
    "0 */5 1 * * *",
    "0 0 9 * * MON-FRI",
    "@daily",
]
ZONES = [
    "UTC",
    "Europe/London",
    "America/New_York",
    "America/Santiago",  # changes at midnight, southern hemisphere
    "Australia/Lord_Howe",  # a 30-minute shift
    "Antarctica/Troll",  # a two-hour shift
    "Pacific/Chatham",  # 45-minute offset
    "Asia/Kolkata",  # no changes
]
TARGET_MAX_MS = 5.0


def transitions(zone: ZoneInfo, years: list[int]) -> list[datetime]:
    """The instants (to the hour) at which ``zone``'s UTC offset changes during ``years``."""
    found = []
    moment = datetime(min(years), 1, 1, tzinfo=UTC)
    end = datetime(max(years) + 1, 1, 1, tzinfo=UTC)
    offset = moment.astimezone(zone).utcoffset()
    while moment < end:
        moment += timedelta(hours=1)
        now = moment.astimezone(zone).utcoffset()
        if now != offset:
            found.append(moment)
            offset = now
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--random", type=int, default=40)
    parser.add_argument("--years", default="2026,2027")
    args = parser.parse_args()
    years = [int(y) for y in args.years.split(",")]
    rng = random.Random(20261201)
    start = datetime(min(years), 1, 1, tzinfo=UTC)
    span = (datetime(max(years) + 1, 1, 1, tzinfo=UTC) - start).total_seconds()
    rows = []
    for shape in SHAPES:
        for name in ZONES:
            schedule = CronSchedule(shape, name)
            instants = [start + timedelta(seconds=rng.uniform(0, span)) for _ in range(args.random)]
            for change in transitions(ZoneInfo(name), years):
                instants += [change - timedelta(seconds=s) for s in (1, 10, 60, 3600)]
            costs: list[float] = []
            errors = 0
            for instant in instants:
                began = time.perf_counter()
                try:
                    schedule.next_after(instant)
                except Exception:  # noqa: BLE001 - counted: an accepted expression that cannot go on
                    errors += 1
                costs.append(time.perf_counter() - began)
            rows.append((shape, name, len(instants), costs, errors))
    machine = f"{platform.node()}, Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}"
    title = f"{args.random} random instants + 4 before each clock change, {args.years}"
    print(f"\nCronSchedule.next_after, {title}; {machine}\n")
    print("| expression | zone | calls | p50 ms | p99 ms | max ms | errors |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for shape, name, calls, costs, errors in rows:
        p50, p99 = ((percentile(costs, q) or 0.0) * 1000 for q in (50, 99))
        worst = max(costs) * 1000
        mark = "✓" if worst < TARGET_MAX_MS and not errors else "✗"
        print(f"| `{shape}` | {name} | {calls} | {p50:.2f} | {p99:.2f} | {worst:.2f} {mark} | {errors} |")


if __name__ == "__main__":
    main()
