"""The Lambda shape's data path at its real throughput: tick -> SQS -> 30 runner environments.

Usage::

    .venv-engine/bin/python bench/lambda_shape.py [--jobs 1500] [--seconds 70] [--processes 6] [--with-moto]

It runs ``tests/support/lambda_shape.py`` (the harness ``tests/e2e/test_lambda_emulation.py`` asserts on)
against MiniStack's SQS (tools/ministack, under uvicorn) and a Redis it starts, and prints one row: fires
per second over the 60 s window (and its slowest second), dispatch lag (handler start - scheduled time),
fires run twice, duplicates and twin deliveries absorbed, records dead-lettered, the runner invocations
at once, and the CPU of every part (% of one core over the window) and per fire. ``--with-moto`` adds the
same harness on moto server's SQS at 300 jobs for 30 s: the emulator the suite used before, side by side.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.support import servers  # noqa: E402
from tests.support.lambda_shape import Result, Shape, chains_hold, run_shape  # noqa: E402

HEADER = (
    "| SQS | jobs (every 1 s) | fires/s (60 s window) | slowest second | lag p50 | lag p99 | lag max | run twice "
    "| duplicates / twin batches absorbed | dead-lettered | invocations at once (max / mean) | CPU, % of one core "
    "| CPU per fire |"
)


def row(name: str, result: Result) -> str:
    cpu = sum(result.cpu.values())
    parts = ", ".join(f"{k.split('-')[0]} {v / result.window_seconds * 100:.0f}" for k, v in _grouped(result).items())
    twice = sum(1 for n in result.fires.values() if n > 1)
    return (
        f"| {name} | {result.shape.jobs:,} | **{result.fires_per_second:,.0f}** | {result.slowest_second:,} "
        f"| {statistics.median(result.lags) * 1000:.0f} ms | {result.lag(0.99) * 1000:.0f} ms "
        f"| {result.lags[-1] * 1000:.0f} ms | {twice} | {result.duplicates_sent:,} / {result.twins} "
        f"| {result.dead_lettered} | {result.most_in_flight} / {result.mean_in_flight:.1f} "
        f"| {cpu / result.window_seconds * 100:.0f} ({parts}) | {cpu / max(1, result.window_fires) * 1e6:,.0f} µs |"
    )


def _grouped(result: Result) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, seconds in result.cpu.items():
        part = "runners" if key.startswith("runner-") else key
        out[part] = out.get(part, 0.0) + seconds
    return out


def run(shape: Shape, emulator: str, workdir: Path) -> Result:
    workdir.mkdir(parents=True)
    redis, redis_url = servers.start_redis(workdir)
    try:
        if emulator == "moto":
            sqs, endpoint = servers.start_moto(workdir)
        else:
            sqs, endpoint = servers.start_ministack(workdir / "ministack", MS_SERVER="uvicorn")
    except BaseException:
        redis.stop()
        raise
    try:
        pids = {emulator: sqs.pid, "redis": redis.pid}
        result = run_shape(shape, endpoint=endpoint, redis_url=redis_url, workdir=workdir, server_pids=pids)
    finally:
        sqs.stop()
        redis.stop()
    problems = []
    if set(result.fires.values()) != {1}:
        problems.append("a fire ran more than once")
    if set(result.executions) != set(result.fires) or not result.drained or result.errors or result.undeleted:
        problems.append("a fire was lost, or the harness dropped a delivery")
    if not chains_hold(result):
        problems.append("a job's fires broke its schedule")
    if result.dead_lettered or result.records_failed:
        problems.append(f"{result.dead_lettered} dead-lettered, {result.records_failed} failed")
    if problems:
        print(f"{emulator}: " + "; ".join(problems), file=sys.stderr)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=Shape.jobs)
    parser.add_argument("--seconds", type=float, default=Shape.seconds)
    parser.add_argument("--processes", type=int, default=Shape.processes)
    parser.add_argument("--with-moto", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="lambda-shape-") as tmp:
        shape = Shape(jobs=args.jobs, seconds=args.seconds, processes=args.processes)
        rows.append(row("MiniStack 1.5.33", run(shape, "ministack", Path(tmp) / "ministack")))
        if args.with_moto:
            small = Shape(jobs=300, seconds=40.0, processes=args.processes)
            rows.append(row("moto 5 server", run(small, "moto", Path(tmp) / "moto")))
    print(f"\nLambda shape, {datetime.now(UTC):%Y-%m-%d}, {platform.machine()}, {platform.python_version()}\n")
    print(HEADER)
    print("|" + "---|" * HEADER.count(" | ") + "---|")
    for line in rows:
        print(line)


if __name__ == "__main__":
    main()
