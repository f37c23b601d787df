"""The tick function's loop alone: how many fires a second one loop hands to a real SQS queue.

Usage::

    .venv-engine/bin/python bench/tick.py [--rate 3000] [--seconds 30]

One-shot jobs are stored in the embedded SQLite file, ``--rate`` of them due in each second of a
``--seconds`` window, more than the target (2,000 fires/s, issue 15) so that what is measured is the
loop's ceiling rather than the load. The tick process is the one ``tests/e2e/test_lambda_emulation.py``
runs (``tests/support/lambda_shape.py``: ``TickLoop`` over the store, ``SQSQueue`` through boto3 as
deployed, two invocations handing over half-way), sending into MiniStack's SQS (tools/ministack, under
uvicorn: the emulator the suite deploys the template into) with nothing consuming. The bench reads the
queue's depth every 0.5 s (``GetQueueAttributes``) and reports: fires/s over the window (messages
arrived / seconds), the slowest second, how far the sends fell behind the fires' due times at the end,
and the CPU of the tick process and of MiniStack per fire. Nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.support import servers  # noqa: E402
from tests.support.lambda_shape import CREDENTIALS, REGION, _container, _cpu, _spawn  # noqa: E402

LEAD = 6.0  # s from storing the jobs to the first due second (the tick process starts meanwhile)
CHUNK = 20_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=3000, help="one-shot jobs due in each second")
    parser.add_argument("--seconds", type=int, default=30, help="seconds of due jobs (the window)")
    args = parser.parse_args()
    import boto3

    from tests.support.factories import make_job
    from ticklock.domain.schedules import OnceSchedule

    with tempfile.TemporaryDirectory(prefix="ticklock-bench-tick-") as tmp:
        workdir = Path(tmp)
        redis, redis_url = servers.start_redis(workdir)
        ministack, endpoint = servers.start_ministack(workdir / "ministack", MS_SERVER="uvicorn")
        try:
            sqs = boto3.client("sqs", endpoint_url=endpoint, region_name=REGION, **CREDENTIALS)
            queue_url = sqs.create_queue(QueueName=f"tick-{uuid.uuid4().hex[:6]}")["QueueUrl"]
            spec = {"endpoint": endpoint, "redis": redis_url, "db": str(workdir / "tick.db"),
                    "queue_url": queue_url, "max_receives": 3, "seconds": args.seconds + LEAD + 10,
                    "out": str(workdir / "tick.out")}  # fmt: skip
            box = _container(spec, "seed")
            total = args.rate * args.seconds
            began = box.clock.now()
            first = began.replace(microsecond=0) + timedelta(seconds=LEAD + 1)
            for start in range(0, total, CHUNK):
                box.store.add_jobs(
                    [
                        make_job(f"once-{i:07d}", schedule=OnceSchedule(due), next_run_at=due)
                        for i in range(start, min(total, start + CHUNK))
                        for due in [first + timedelta(microseconds=1_000_000 * i // args.rate)]
                    ]
                )
            seeded = (box.clock.now() - began).total_seconds()
            if seeded > LEAD - 2:
                print(f"storing {total:,} jobs took {seeded:.1f} s: the first fires are late", file=sys.stderr)
            tick = _spawn("tick", spec, workdir)
            samples: list[tuple[float, int]] = []
            cpu_at: dict[str, tuple[float, float]] = {}
            end = first + timedelta(seconds=args.seconds)
            while True:
                now = box.clock.now()
                depth = int(sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])
                            ["Attributes"]["ApproximateNumberOfMessages"])  # fmt: skip
                samples.append((now.timestamp(), depth))
                if "start" not in cpu_at and now >= first:
                    cpu_at["start"] = (_cpu(tick.pid), _cpu(ministack.pid))
                if now >= end and "end" not in cpu_at:
                    cpu_at["end"] = (_cpu(tick.pid), _cpu(ministack.pid))
                if depth >= total or now >= end + timedelta(seconds=15):
                    # all sent before the window's end (the tick sends ahead): its CPU is all spent by now
                    cpu_at.setdefault("end", (_cpu(tick.pid), _cpu(ministack.pid)))
                    break
                time.sleep(0.5)
            tick.kill()
            tick.wait(30)
        finally:
            ministack.stop()
            redis.stop()
    t0, t1 = first.timestamp(), end.timestamp()
    in_window = [(t, d) for t, d in samples if t0 <= t <= t1]
    if len(in_window) < 3:
        raise SystemExit(f"only {len(in_window)} readings of the queue fell in the window: nothing to measure")
    arrived = in_window[-1][1] - in_window[0][1]
    span = in_window[-1][0] - in_window[0][0]
    per_second = [
        (b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(in_window, in_window[2:], strict=False) if b[0] - a[0] > 0
    ]
    behind = max(0.0, total * min(1.0, (t1 - t0) / args.seconds) - in_window[-1][1])
    done_at = next((t for t, d in samples if d >= total), None)
    tick_cpu = cpu_at["end"][0] - cpu_at["start"][0] if "end" in cpu_at else float("nan")
    sqs_cpu = cpu_at["end"][1] - cpu_at["start"][1] if "end" in cpu_at else float("nan")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    machine = f"{platform.machine()}, Python {platform.python_version()}, {when}"
    print(f"\nThe tick loop alone into MiniStack's SQS; {machine}\n")
    print("| SQS | due a second | fires/s sent (window) | slowest second | behind at the end | all sent after the "
          "last due | tick CPU per fire | MiniStack CPU per fire |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    print(
        f"| MiniStack 1.5.33 | {args.rate:,} | **{arrived / span:,.0f}** | {min(per_second):,.0f} "
        f"| {behind:,.0f} fires "
        f"| {'' if done_at is None else f'{done_at - t1:.1f} s'} | {tick_cpu / max(arrived, 1) * 1e6:,.0f} µs "
        f"| {sqs_cpu / max(arrived, 1) * 1e6:,.0f} µs |"
    )
    print(json.dumps({"samples": len(samples), "total": total}), file=sys.stderr)


if __name__ == "__main__":
    main()
