"""The runner function's batch handling alone: ``run_batch`` on SQS batches of ten records of a quick
handler (one that notes it ran), against a real SQLite store, in-process (issue 47).

Usage::

    git worktree add --detach /tmp/before main      # the code to compare with, once
    .venv-engine/bin/python bench/runner_batch.py --before /tmp/before [--batches 200] [--rounds 3]

Each variant runs in a child process of its own with its tree's ``layers/common`` first on ``PYTHONPATH``:
this checkout's ticklock and, with ``--before DIR``, that checkout's. A child stores ``batches x 10`` jobs
due now in a fresh SQLite file, claims them and encodes their fires as the tick does (not timed), runs a
few batches to warm up, then times each ``run_batch`` call: CPU of the whole process (the pool's threads
included) and wall time. Log lines below WARNING are not written (no handler): what is timed is the
batch's handling and the five steps, not the JSON formatter.

Two modes, because powertools' async batch processor runs its event loop two ways: **Lambda** sets
``LAMBDA_TASK_ROOT`` as the Lambda runtime does (one event loop kept for the environment); **outside
Lambda** leaves it unset (``asyncio.run``: a new loop per batch, as in the tests and the in-process
harness of ``bench/lambda_shape.py``). Each mode is also run with ``runner.run`` replaced by a no-op: the
batch's machinery alone (decoding, threads, the answer), without the store's noise. Rounds alternate the
variants. Nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RECORDS = 10  # the template's BatchSize, at most
MARK = "BENCH-RESULT "
CHILD_TIMEOUT = 900


# -- the child: one variant, one mode -----------------------------------------------------------------------
def child(batches: int, warmup: int, *, stub: bool) -> None:
    sys.path.insert(0, str(REPO))
    from tests.support.factories import make_job
    from tests.support.lambda_sqs import sqs_event
    from tests.support.recorders import RecordingMetrics
    from ticklock.adapters.queue.sqs import encode_fire

    try:
        from ticklock.engine.dispatcher import Dispatcher
    except ImportError:  # a checkout from before the engine package (--before)
        from ticklock.domain.dispatcher import Dispatcher  # type: ignore[no-redef,import-not-found]
    from ticklock.domain.fires import Fire
    from ticklock.handlers.builtin import register as register_builtin
    from ticklock.handlers.registry import HandlerContext, Registry
    from ticklock.runtimes import aws
    from ticklock.settings import Settings

    class Captured:
        """The tick's queue, keeping each fire's message body."""

        def __init__(self) -> None:
            self.bodies: list[str] = []

        def submit(self, fire: Fire) -> None:
            self.bodies.append(encode_fire(fire))

        def free_slots(self) -> int:
            return 1_000_000

        def flush(self) -> None:
            pass

        def drain_unstarted(self) -> list[Fire]:
            return []

    with tempfile.TemporaryDirectory(prefix="runner-batch-") as folder:
        settings = Settings.load(environ={"TICKLOCK_DB": str(Path(folder) / "t.db")})
        ran: list[str] = []  # list.append is atomic: the records' threads share it

        def quick(ctx: HandlerContext) -> None:
            ran.append(ctx.job_id)

        registry = Registry()
        register_builtin(registry)
        registry.register("bench.quick", quick)
        box = aws.build(settings, registry=registry)
        if stub:  # the batch's machinery alone: each record decoded and handed to a runner that only notes it

            def noted(fire: Fire) -> Any:
                ran.append(fire.job.id)

            box.runner.run = noted  # type: ignore[method-assign]
        total = (batches + warmup) * RECORDS
        now = box.clock.now()
        for i in range(total):
            box.store.add_job(make_job(f"quick-{i}", handler="bench.quick", next_run_at=now))
        queue = Captured()
        tick = Dispatcher(
            store=box.store, queue=queue, clock=box.clock, metrics=RecordingMetrics(), owner="tick",
            max_pending=total,
        )  # fmt: skip
        while tick.claim(box.clock.now())[0]:
            pass
        tick.release_due(box.clock.now())
        if len(queue.bodies) != total:
            raise SystemExit(f"bench: {len(queue.bodies)} fires claimed of {total}")
        messages = [{"MessageId": f"m{i}", "ReceiptHandle": f"r{i}", "Body": b} for i, b in enumerate(queue.bodies)]
        events = [
            sqs_event(messages[start : start + RECORDS], "arn:aws:sqs:us-east-1:000000000000:fires")
            for start in range(0, total, RECORDS)
        ]
        cpu, wall, failed = [], [], 0
        for n, event in enumerate(events):
            c0, w0 = time.process_time(), time.perf_counter()
            answer = aws.run_batch(event, None, box)
            c1, w1 = time.process_time(), time.perf_counter()
            failed += len(answer["batchItemFailures"])
            if n >= warmup:
                cpu.append(c1 - c0)
                wall.append(w1 - w0)
        box.close()
    print(MARK + json.dumps({"cpu": cpu, "wall": wall, "failed": failed, "ran": len(set(ran)), "total": total}))


# -- the parent: variants side by side ----------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    code: str  # "this checkout" or "before"
    tree: Path
    lambda_mode: bool
    stub: bool

    def key(self) -> tuple[bool, bool]:
        return self.lambda_mode, self.stub


def run_child(variant: Variant, batches: int, warmup: int) -> dict[str, Any]:
    drop = ("TICKLOCK_", "AWS_", "POWERTOOLS_", "PYTHON", "LAMBDA_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PYTHONPATH"] = str(variant.tree / "layers" / "common")
    env["AWS_DEFAULT_REGION"] = "us-east-1"
    if variant.lambda_mode:
        env["LAMBDA_TASK_ROOT"] = str(variant.tree / "functions" / "runner")
    argv = [sys.executable, __file__, "--child", "--batches", str(batches), "--warmup", str(warmup)]
    argv += ["--stub"] if variant.stub else []
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(MARK)]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"bench: the child {variant} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    data: dict[str, Any] = json.loads(lines[-1].removeprefix(MARK))
    if data["failed"] or data["ran"] != data["total"]:
        raise SystemExit(f"bench: the child {variant} ran {data['ran']} of {data['total']}, {data['failed']} failed")
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, help="a checkout to time beside this one (its layers/common)")
    parser.add_argument("--batches", type=int, default=150, help="timed batches of ten per child (default 150)")
    parser.add_argument("--warmup", type=int, default=5, help="batches run first, not timed (default 5)")
    parser.add_argument("--rounds", type=int, default=6, help="children per variant, alternated (default 6)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--stub", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.batches, args.warmup, stub=args.stub)
        return
    if args.before is not None and not (args.before / "layers" / "common" / "ticklock").is_dir():
        raise SystemExit(f"bench: {args.before} has no layers/common/ticklock")
    trees = [("this checkout", REPO)] + ([("before", args.before)] if args.before else [])
    variants = [
        Variant(code, tree, lambda_mode, stub)
        for stub in (False, True)
        for lambda_mode in (True, False)
        for code, tree in trees
    ]
    cpu: dict[Variant, list[float]] = {v: [] for v in variants}
    wall: dict[Variant, list[float]] = {v: [] for v in variants}
    for round_ in range(args.rounds):
        for variant in variants if round_ % 2 == 0 else reversed(variants):
            data = run_child(variant, args.batches, args.warmup)
            cpu[variant] += data["cpu"]
            wall[variant] += data["wall"]
    print(f"\nrun_batch, {RECORDS} records of a quick handler a batch, SQLite, in-process; {args.rounds} rounds x "
          f"{args.batches} batches per row; Python {platform.python_version()}, {os.cpu_count()} CPUs"
          + (f"; before = {args.before}" if args.before else "") + "\n")  # fmt: skip
    print("| records | mode | code | CPU per batch, median | mean | CPU per record (median) | wall per batch, "
          "median | CPU vs before |")  # fmt: skip
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for variant in variants:
        median = statistics.median(cpu[variant])
        before = next((v for v in variants if v.code == "before" and v.key() == variant.key()), None)
        ratio = f"{median / statistics.median(cpu[before]):.2f}x" if before and before != variant else ""
        print(
            f"| {'runner.run a no-op' if variant.stub else 'the five steps'} "
            f"| {'Lambda' if variant.lambda_mode else 'outside Lambda'} | {variant.code} | {median * 1e3:.2f} ms "
            f"| {statistics.mean(cpu[variant]) * 1e3:.2f} ms | {median / RECORDS * 1e6:.0f} µs "
            f"| {statistics.median(wall[variant]) * 1e3:.2f} ms | {ratio} |"
        )


if __name__ == "__main__":
    main()
