"""Throughput and latency of the REST API of ``ticklock serve`` (issue 9).

Usage::

    .venv/bin/python bench/api.py [--seconds 5] [--clients 1,16,64]

Starts ``ticklock serve`` as its own process on a fresh SQLite file holding 10,000 jobs (hourly, so the
dispatcher stays out of the way), then for each of ``GET /jobs/{id}``, ``GET /jobs?limit=50``,
``POST /jobs`` and ``POST /jobs:batch`` (1,000 jobs a request, half interval and half cron, none
due during the run; the rows before it add to the store, so it grows past 10,000) drives it for
``--seconds`` with 1, 4, 16 and 64 concurrent clients (the batch at 1 and 4: the route takes 4 at
once). Each row gives the server's CPU per request (per job for a batch). The clients are one asyncio
process of raw HTTP/1.1 keep-alive connections (a few
dozen microseconds per request: a general-purpose client library would be the bottleneck on two
cores), so the server's own cost shows.
In the same run, the peer for scale: bare uvicorn with httptools (the same HTTP stack, one process)
answering every request with a constant JSON body, the ceiling of the transport on this machine.
Each request is timed from its first byte sent to the last byte of its answer; a request unanswered
within 10 s, an error status or a dropped connection counts as an error. Targets (2 cores): GET
>= 2,000/s and POST >= 500/s at 64 clients with p99 < 50 ms. Nothing here asserts: the table is for a reader.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stats import percentile

from ticklock.api.asgi import LARGE_IN_FLIGHT

REPO = Path(__file__).resolve().parents[1]
JOBS = 10_000
BATCH = 1_000  # jobs per POST /jobs:batch
TIMEOUT = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


PEER = """
import uvicorn
BODY = b'{"id":"0123456789abcdef0123456789abcdef","name":"bench","handler":"noop"}'
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await receive()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]})
    await send({"type": "http.response.body", "body": BODY})
uvicorn.run(app, host="127.0.0.1", port=int(__import__("sys").argv[1]), http="httptools", log_level="warning",
            access_log=False, lifespan="off")
"""


def wait_up(port: int) -> None:
    for _ in range(200):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.05)


def seed(db: Path) -> list[str]:
    from ticklock.adapters.store.sqlite import SQLiteStore
    from ticklock.clock import SystemClock
    from ticklock.domain.schedules import IntervalSchedule
    from ticklock.domain.service import JobService, JobSpec
    from ticklock.handlers.contract import Registry
    from ticklock.runtimes.plugins import register_all

    store = SQLiteStore(db)
    service = JobService(store, register_all(Registry()), SystemClock())
    ids = [
        service.create(JobSpec(f"bench-{i}", "noop", IntervalSchedule(3600), {"i": i}, 10.0, 0, True)).id
        for i in range(JOBS)
    ]
    store.close()
    return ids


class Conn:
    """One keep-alive HTTP/1.1 connection; reads answers by Content-Length."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def call(self, raw: bytes) -> int:
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        if length:
            await self.reader.readexactly(length)
        return status


def request(method: str, path: str, body: bytes = b"") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: bench\r\nContent-Length: {len(body)}\r\n"
    if body:
        head += "Content-Type: application/json\r\n"
    return head.encode() + b"\r\n" + body


async def drive(port: int, clients: int, seconds: float, make: object) -> tuple[list[float], int, int, int]:
    """Requests answered (their latencies), errors (no answer, a dropped connection, or a status other
    than the expected one), milliseconds taken, and answers with the expected status."""
    latencies: list[float] = []
    errors = 0
    good = 0
    until = time.perf_counter() + seconds

    async def client(index: int) -> None:
        nonlocal errors, good
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        conn = Conn(reader, writer)
        counter = itertools.count()
        try:
            while time.perf_counter() < until:
                raw, ok = make(index, next(counter))  # type: ignore[operator]
                started = time.perf_counter()
                try:
                    status = await asyncio.wait_for(conn.call(raw), TIMEOUT)
                except (TimeoutError, OSError, asyncio.IncompleteReadError):
                    errors += 1
                    writer.close()
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                    conn = Conn(reader, writer)
                    continue
                latencies.append(time.perf_counter() - started)
                if status != ok:
                    errors += 1
                else:
                    good += 1
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    return latencies, errors, int((time.perf_counter() - started) * 1000), good


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", default="1,4,16,64")
    parser.add_argument("--only", default="", help="comma-separated words: only the rows whose request holds one")
    args = parser.parse_args()
    counts = [int(c) for c in args.clients.split(",")]

    folder = Path(tempfile.mkdtemp(prefix="ticklock-bench-api-"))
    db = folder / "bench.db"
    ids = seed(db)
    port = free_port()
    env = {**os.environ, "TICKLOCK_DB": str(db), "TICKLOCK_PORT": str(port), "TICKLOCK_LOG_LEVEL": "warning"}
    server = subprocess.Popen([sys.executable, "-m", "ticklock", "serve"], env=env, cwd=folder)
    peer_port = free_port()
    peer = subprocess.Popen([sys.executable, "-c", PEER, str(peer_port)])
    try:
        wait_up(port)
        wait_up(peer_port)
        run_tag = os.urandom(3).hex()

        def post_job(i: int, n: int) -> tuple[bytes, int]:
            name = f"new-{run_tag}-{time.perf_counter_ns()}-{i}"  # unique across rows and clients
            job = {
                "name": name,
                "handler": "noop",
                "schedule": {"kind": "interval", "seconds": 3600},
                "payload": {"n": n},
            }
            return request("POST", "/jobs", json.dumps(job).encode()), 201

        def post_batch(i: int, n: int) -> tuple[bytes, int]:
            stamp = f"{run_tag}-{time.perf_counter_ns()}-{i}"
            jobs = [
                {
                    "name": f"batch-{stamp}-{k}",
                    "handler": "noop",
                    "schedule": {"kind": "cron", "expr": f"{k % 60} {k % 60} 0 1 1 *"} if k % 2 else
                                {"kind": "interval", "seconds": 3600},
                    "payload": {"n": n, "k": k},
                }
                for k in range(BATCH)
            ]  # fmt: skip
            return request("POST", "/jobs:batch", json.dumps({"jobs": jobs}).encode()), 201

        scenarios = {
            "GET /jobs/{id}": lambda i, n: (request("GET", f"/jobs/{ids[(i * 7919 + n) % JOBS]}"), 200),
            "GET /jobs?limit=50": lambda i, n: (request("GET", f"/jobs?limit=50&after={ids[(i * 31 + n) % JOBS]}"),
                                                200),
            "POST /jobs": post_job,
            f"POST /jobs:batch ({BATCH:,} jobs)": post_batch,
        }  # fmt: skip
        per_request = {f"POST /jobs:batch ({BATCH:,} jobs)": BATCH}
        rows = []
        runs = [(name, port, make) for name, make in scenarios.items()]
        runs.append(("peer: bare uvicorn, constant JSON", peer_port, lambda i, n: (request("GET", "/x"), 200)))
        for name, target, make in runs:
            if args.only and not any(word in name for word in args.only.split(",")):
                continue
            process = psutil.Process(server.pid if target == port else peer.pid)
            # a batch route takes LARGE_IN_FLIGHT requests at once and answers the rest 503 at once
            for clients in [c for c in counts if name not in per_request or c <= LARGE_IN_FLIGHT] or [1]:
                before = process.cpu_times()
                latencies, errors, ms, good = asyncio.run(drive(target, clients, args.seconds, make))
                after = process.cpu_times()
                cpu = after.user + after.system - before.user - before.system
                rate = good / (ms / 1000)
                items = good * per_request.get(name, 1)
                p50, p99 = (percentile(latencies, q) or float("nan") for q in (50, 99))
                rows.append((name, clients, len(latencies), rate, rate * per_request.get(name, 1), cpu / max(items, 1),
                             p50, p99, errors))  # fmt: skip
        machine = f"{platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}"
        print(f"\nticklock serve REST API, SQLite with {JOBS:,} jobs at the start; {args.seconds:g} s per row; "
              f"{machine}, {time.strftime('%Y-%m-%d')}\n")  # fmt: skip
        print("| request | clients | answered | requests/s (expected status) | jobs created/s "
              "| server CPU per request (per job) µs | p50 ms | p99 ms | errors |")  # fmt: skip
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for name, clients, count, rate, made, cpu, p50, p99, errors in rows:
            created = f"{made:,.0f}" if name.startswith("POST") else ""
            print(
                f"| `{name}` | {clients} | {count:,} | {rate:,.0f} | {created} | {cpu * 1e6:,.0f} | {p50 * 1000:.1f} "
                f"| {p99 * 1000:.1f} | {errors} |"
            )
    finally:
        for proc in (server, peer):
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
