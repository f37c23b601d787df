"""The dashboard's weight and speed with 100,000 jobs stored.

Usage::

    .venv/bin/python bench/dashboard.py [--jobs 100000] [--loads 9]

It seeds a fresh SQLite file with ``--jobs`` jobs (cron, interval and one-shot; a tenth paused; 70 % with
a run summary, some failing; names from a small vocabulary, so that a search matches many), starts the
real ``ticklock serve`` on it, and loads each page ``--loads`` times in Debian's headless Chromium
(Playwright), each load in a fresh browser context (an empty cache). Per page it prints:

* **first screen**: from the navigation's start to when the page has drawn its content (the page marks
  it: ``body[data-rendered]``, set after the route's render), median and worst;
* **bytes**: everything the page loaded (the document, its script and stylesheet, every API answer),
  from the browser's resource timing, the largest of the loads;
* **API**: the page's slowest API call, median over the loads (the browser's own timing).

The issue's bar: the jobs page answers its first screen in under 300 ms with 100,000 jobs stored, and no
page loads more than 300 kB. Nothing here asserts it: the figures go in the README with the date.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fires import _job, ticklock_command

from ticklock.adapters.store.sqlite import SQLiteStore
from ticklock.domain.schedules import CronSchedule, IntervalSchedule, OnceSchedule, Schedule

WORDS = ["backup", "report", "sync", "cleanup", "billing", "export", "import", "scan", "index", "mail"]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def seed(db: Path, count: int) -> str:
    """``count`` jobs; returns the id of one with history, for the job page."""
    store = SQLiteStore(str(db))
    now = datetime.now(UTC)
    rng = random.Random(13)
    shapes: list[Schedule] = [CronSchedule("*/30 * * * * *"), CronSchedule("0 30 9 * * MON-FRI", "Europe/London"),
              IntervalSchedule(3600), OnceSchedule(now + timedelta(days=30))]  # fmt: skip
    for start in range(0, count, 5000):
        batch = []
        for i in range(start, min(count, start + 5000)):
            name = f"{rng.choice(WORDS)}-{rng.choice(WORDS)}-{i:06d}"
            job = _job(name, rng.choice(shapes), now + timedelta(hours=1, seconds=rng.randrange(86400)), now)
            batch.append(job.with_changes(enabled=rng.random() > 0.1, handler=rng.choice(["noop", "http.check"])))
        store.add_jobs(batch)
    store.close()
    with sqlite3.connect(db) as conn:  # a run summary on 70 %, a fifth of those failing
        conn.execute(
            "UPDATE jobs SET last_status = CASE WHEN abs(random()) % 5 = 0 THEN 'failed' ELSE 'success' END, "
            "last_at = ?, runs = 40, runs_ok = 30 WHERE abs(random()) % 10 < 7",
            (int((now - timedelta(minutes=3)).timestamp() * 1_000_000),),
        )
        (job_id,) = conn.execute("SELECT id FROM jobs ORDER BY name LIMIT 1").fetchone()
    return str(job_id)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(db: Path, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "TICKLOCK_DB": str(db), "TICKLOCK_PORT": str(port), "TICKLOCK_LOG_LEVEL": "warning"}
    log = (workdir / "serve.log").open("wb")
    proc = subprocess.Popen([ticklock_command(), "serve"], env=env, stdout=log, stderr=log, cwd=workdir)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as answer:
                if answer.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"bench: ticklock serve did not start:\n{(workdir / 'serve.log').read_text()}")


def measure(browser: Any, url: str, route: str, loads: int) -> dict[str, Any]:
    firsts, sizes, apis = [], [], []
    for _ in range(loads):
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.goto(f"{url}/ui/#{route}")
        page.wait_for_selector("body[data-rendered]", timeout=30_000)
        firsts.append(float(page.evaluate("Number(document.body.dataset.rendered)")))
        entries = page.evaluate(
            "[...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')]"
            ".map(e => ({name: e.name, size: e.transferSize || e.encodedBodySize, took: e.duration,"
            " kind: e.initiatorType}))"
        )
        sizes.append(sum(e["size"] for e in entries))
        calls = [e["took"] for e in entries if e["kind"] == "fetch"]
        apis.append(max(calls) if calls else 0.0)
        context.close()
    return {
        "first": statistics.median(firsts),
        "worst": max(firsts),
        "bytes": max(sizes),
        "api": statistics.median(apis),
    }


def main(argv: list[str] | None = None) -> int:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--loads", type=int, default=9)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ticklock-dashboard-") as tmp:
        workdir = Path(tmp)
        db = workdir / "bench.db"
        began = time.monotonic()
        job_id = seed(db, args.jobs)
        print(f"dashboard: seeded {args.jobs:,} jobs in {time.monotonic() - began:.0f} s", file=sys.stderr)
        proc, url = serve(db, workdir)
        pages = [
            ("overview", "/"),
            ("jobs (by name)", "/jobs"),
            ("jobs by next fire, descending", "/jobs?sort=-next_run_at"),
            ("jobs: search 'backup-sync'", "/jobs?q=backup-sync"),
            ("jobs: failing", "/jobs?state=failing"),
            ("job", f"/jobs/{job_id}"),
            ("new job", "/new"),
        ]
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
                measure(browser, url, "/jobs", 2)  # warm the server's caches and the browser binary
                rows = [(name, measure(browser, url, route, args.loads)) for name, route in pages]
                browser.close()
        finally:
            proc.terminate()
            proc.wait(30)
    print(f"\n{args.jobs:,} jobs stored (SQLite), {args.loads} loads per page, each in a fresh browser context\n")
    print("| page | first screen, median | worst | bytes loaded | slowest API call, median |")
    print("|---|---:|---:|---:|---:|")
    for name, r in rows:
        print(
            f"| {name} | {r['first']:.0f} ms | {r['worst']:.0f} ms | {r['bytes'] / 1024:.1f} kB | {r['api']:.0f} ms |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
