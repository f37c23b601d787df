"""Alert scanner benchmark: 20,000 alert documents of 3 rules each, a full scan, on each store.

Usage::

    .venv/bin/python plugins/parts/bench/alerts.py [--quick] [--only sqlite,mongodb] [--alerts N]

The store is filled with ``--alerts`` alert documents (20,000; ``--quick`` 2,000), each watching one of
5,000 parts with three rules (a risk score level, a lifecycle change, a price change of more than 5 %),
and the parts. Then two full scans, the scanner as ``alerts.scan`` runs it (batches of 200, 50 lookups in
flight, the parts looked up on the store, one bulk write back per batch):

* **first**: every rule is checked for the first time (cursors and baselines are set, nothing fires);
* **second**: two hours later (past every cooldown), after the pipelines changed a tenth of the parts:
  the rules on those parts fire and their notifications are written.

Printed: rules evaluated, seconds, rules per second, batches and notifications, per store and scan.
"sqlite" is the embedded store (a file in a temporary folder); "mongodb" is FerretDB 1.24 on
PostgreSQL, started with the helpers of ``tests/support/servers.py`` (the servers the tests use). Target
(issue 5): 20,000 x 3 rules in under 60 s on 2 cores with lookups on the store.

FerretDB 1.24 pushes no ``_id`` lookup down to PostgreSQL: every guarded update and every part lookup
reads the whole collection, so a scan's time grows with the square of the alerts. It runs with
``--mongodb-alerts`` (2,000) documents; a real MongoDB answers both from the ``_id`` index.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PARTS = 5_000
TARGET_SECONDS = 60.0


@dataclass
class Result:
    store: str
    scan: str
    rules: int
    seconds: float
    batches: int
    notifications: int
    errors: int


def alert_docs(count: int, rng: random.Random) -> list[dict[str, Any]]:
    return [
        {
            "_id": f"alert-{i:06d}",
            "userId": f"user-{i % 3000}",
            "partId": f"part-{rng.randrange(PARTS):05d}",
            "email": f"user{i % 3000}@example.com",
            "rules": [
                {"id": "risk", "type": "riskScore", "operator": "gte", "threshold": "70"},
                {"id": "stage", "type": "lifecycle", "operator": "changed"},
                {"id": "price", "type": "price_change", "operator": "gt", "threshold": "5%"},
            ],
        }
        for i in range(count)
    ]


def part_docs(rng: random.Random, changed: set[int] | None = None) -> list[dict[str, Any]]:
    docs = []
    for i in range(PARTS):
        moved = changed is not None and i in changed
        docs.append(
            {
                "_id": f"part-{i:05d}",
                "price": round(1 + (i % 97) * (1.2 if moved else 1.0), 4),
                "riskScore": 80 if moved else 20 + i % 40,
                "lifecycle": "EOL" if moved else "Active",
            }
        )
    return docs


@contextmanager
def stores(only: set[str], workdir: Path) -> Iterator[list[tuple[str, Any]]]:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from ticklock_parts.adapters.alerts.mongo import MongoAlertStore
    from ticklock_parts.adapters.alerts.sqlite import SQLiteAlertStore

    with ExitStack() as stack:
        found: list[tuple[str, Any]] = []
        if "sqlite" in only:
            sqlite = SQLiteAlertStore(workdir / "alerts.db")
            stack.callback(sqlite.close)
            found.append(("sqlite (embedded)", sqlite))
        if "mongodb" in only:
            from tests.support import servers

            postgres, postgres_url = servers.start_postgresql(workdir)
            stack.callback(postgres.stop)
            ferretdb, uri = servers.start_ferretdb(workdir, postgresql_url=postgres_url)
            stack.callback(ferretdb.stop)
            found.append(("mongodb (FerretDB 1.24 on PostgreSQL)", MongoAlertStore(uri, database="alerts_bench")))
        yield found


def run(name: str, store: Any, alerts: int, seed: int) -> list[Result]:
    from ticklock_parts.alerts.scanner import Scanner

    rng = random.Random(seed)
    started = time.perf_counter()
    store.put_parts(part_docs(rng))
    store.put_alerts(alert_docs(alerts, rng))
    print(f"bench: {name}: {alerts:,} alerts and {PARTS:,} parts stored in {time.perf_counter() - started:.1f} s")
    offset = timedelta(0)

    def now() -> datetime:
        return datetime.now(UTC) + offset

    results = []
    for scan in ("first", "second"):
        if scan == "second":
            offset += timedelta(hours=2)
            store.put_parts(part_docs(rng, changed=set(rng.sample(range(PARTS), PARTS // 10))))
        scanner = Scanner(store, email=None, now=now)
        began = time.perf_counter()
        report = asyncio.run(scanner.scan(now() + timedelta(hours=1)))
        seconds = time.perf_counter() - began
        results.append(
            Result(
                name, scan, report.rules_evaluated, seconds, report.batches, report.notifications, report.rule_errors
            )
        )
        print(f"bench: {name}: {scan} scan, {report.rules_evaluated:,} rules in {seconds:.1f} s")
    return results


def table(results: list[Result], alerts: int) -> str:
    lines = [
        f"| store | scan | alerts | rules evaluated | seconds | rules/s | batches | notifications | rule errors | "
        f"{alerts * 3:,} rules < {TARGET_SECONDS:.0f} s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        full = r.rules == alerts * 3
        ok = ("✓" if r.seconds < TARGET_SECONDS else "✗") if full else "not measured at this size"
        lines.append(
            f"| {r.store} | {r.scan} | {r.rules // 3:,} | {r.rules:,} | {r.seconds:.1f} | {r.rules / r.seconds:,.0f} "
            f"| {r.batches} | {r.notifications:,} | {r.errors} | {ok} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="2,000 alerts instead of 20,000")
    parser.add_argument("--alerts", type=int, default=None, help="alert documents (default 20,000)")
    parser.add_argument("--only", default="sqlite,mongodb", help="stores: sqlite, mongodb (comma-separated)")
    parser.add_argument(
        "--mongodb-alerts",
        type=int,
        default=2_000,
        help="alert documents on FerretDB (default 2,000: it reads the whole collection for every update "
        "and lookup by _id, so its time grows with the square of the collection; see the docstring)",
    )
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    alerts = args.alerts or (2_000 if args.quick else 20_000)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="ticklock-alerts-bench-") as tmp, stores(only, Path(tmp)) as found:
        for name, store in found:
            count = min(alerts, args.mongodb_alerts) if name.startswith("mongodb") else alerts
            results += run(name, store, count, args.seed)
    print()
    print(f"### Alert scan, {alerts:,} alerts x 3 rules, {PARTS:,} parts ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)")
    print()
    print(table(results, alerts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
