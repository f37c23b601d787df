"""The Lambda deployment's data path at its real throughput: tick -> SQS -> runners, on MiniStack's SQS.

What runs (each part a process of its own, so that the two cores are shared as Lambda's environments
would share them rather than under one GIL):

* **SQS**: MiniStack (tools/ministack), a fire queue with a redrive policy to a dead-letter queue.
* **The tick function's loop**: one process running ``TickLoop`` over the store with ``SQSQueue`` (boto3, as
  deployed), as two invocations handing over half-way (EventBridge's next minute).
* **The runner function**: ``processes`` processes hosting ``concurrency`` (30, the event source mapping's
  ``MaximumConcurrency``) environments between them. Each environment handles one invocation at a time
  with its own runner threads; a process's environments share its store and lock clients. Pollers play
  Lambda's SQS poller: wait for a free environment, long-poll a batch of up to 10, call ``aws.run_batch``
  (the runner function's code path) with the SQS event, delete what it did not report failed.
* **Duplicates on purpose**: a share of the messages handled is sent again, and some batches go to two
  environments at once: SQS's at-least-once delivery, made frequent.
* The store is the embedded SQLite file shared by the processes; the locks are on Redis.

Lambda's poller is AWS's code, not ticklock's: here it speaks SQS's JSON protocol over one keep-alive
connection per poller (``PollerSQS``), because botocore's ~1.5 ms of CPU per call would take a third of a
core from the machine at 1,000 fires/s. The tick's sends are ticklock's code and go through boto3.

``run_shape`` returns what was measured; ``tests/e2e/test_lambda_emulation.py`` asserts on it and
``bench/lambda_shape.py`` prints it as a table.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import queue
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
CREDENTIALS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}


@dataclass(frozen=True)
class Shape:
    # interval jobs every second, first fires spread over one second: an interval counts from the end of a
    # run, so each job fires a little less often than every second. 1,500 of them offer ~1,450 fires/s, more
    # than the shape sustains on this machine's two cores (1,150-1,400 measured), so that the rate measured
    # is what the shape sustains, not the load offered (1,200 jobs offered ~1,170/s: the ceiling was the load)
    jobs: int = 1_500
    seconds: float = 70.0  # of ticking: a 60 s window, 5 s after the first fire to 5 s before the end
    concurrency: int = 30  # the event source mapping's MaximumConcurrency
    # the runner processes the environments are spread over: on Lambda each environment is a process;
    # here five share one, so that 30 interpreters do not contend for one SQLite file's write lock
    processes: int = 6
    pollers: int = 1  # per runner process
    duplicate_share: float = 0.05  # of the messages handled, sent again
    twin_share: float = 0.02  # of the batches, delivered to two environments at once
    visibility_timeout: int = 30
    max_receives: int = 5


@dataclass
class Result:
    shape: Shape
    ticked: float  # seconds from the first tick to the last
    fires: Counter[tuple[str, str]]  # handler starts per fire (job id, scheduled time)
    per_job: dict[str, list[datetime]]  # each job's fires, in order
    window_fires: int  # fires scheduled inside the measurement window
    window_seconds: float
    slowest_second: int  # the fewest fires scheduled in one second of the window
    lags: list[float]  # seconds, start - scheduled, over the window
    tick_reports: dict[str, dict[str, Any]]
    invocations: int
    most_in_flight: int  # invocations at once, over all runner processes
    mean_in_flight: float  # invocations at once on average, over the window
    mean_invocation: float  # seconds an invocation took, on average
    duplicates_sent: int
    twins: int
    records_failed: int
    dead_lettered: int
    cpu: dict[str, float]  # CPU seconds in the window, per part
    executions: Counter[tuple[str, str]]  # the store's executions per fire (job id, scheduled time)
    statuses: Counter[str]  # the executions' final statuses
    errors: int  # deliveries the harness itself failed to complete (it must be 0)
    undeleted: int  # DeleteMessageBatch entries the queue refused
    drained: bool  # the queue was empty before the runners stopped
    skips: Counter[str]  # fires the runners skipped, by reason (duplicates, lock held...)
    rss_mb: dict[str, float] = field(default_factory=dict)

    @property
    def fires_per_second(self) -> float:
        return self.window_fires / self.window_seconds

    def lag(self, q: float) -> float:
        return self.lags[min(len(self.lags) - 1, int(len(self.lags) * q))] if self.lags else float("nan")


class PollerSQS:
    """SQS's JSON protocol (``X-Amz-Target: AmazonSQS.<Action>``) over one keep-alive HTTP connection, for
    the emulated Lambda poller (see the module's docstring). Not thread-safe: one per poller thread."""

    def __init__(self, endpoint: str) -> None:
        parts = urlsplit(endpoint)
        self._conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=60)

    def call(self, action: str, body: dict[str, Any]) -> dict[str, Any]:
        headers = {
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": f"AmazonSQS.{action}",
            "Authorization": f"AWS4-HMAC-SHA256 Credential=test/20260101/{REGION}/sqs/aws4_request, "
            "SignedHeaders=host;x-amz-target, Signature=0",
        }
        payload = json.dumps(body).encode()
        for attempt in (1, 2):
            try:
                self._conn.request("POST", "/", payload, headers)
                answer = self._conn.getresponse()
                data = answer.read()
                break
            except (OSError, http.client.HTTPException):
                self._conn.close()  # a keep-alive connection the server closed: once more, on a new one
                if attempt == 2:
                    raise
        if answer.status != 200:
            raise RuntimeError(f"SQS {action}: HTTP {answer.status}: {data[:300]!r}")
        return json.loads(data) if data else {}


# -- the runner processes -------------------------------------------------------------------------------
def _settings(spec: dict[str, Any], owner: str) -> Any:
    from ticklock.settings import Settings

    return Settings.load(
        environ={
            "TICKLOCK_DB": spec["db"],
            "TICKLOCK_LOCK": spec["redis"],
            "TICKLOCK_QUEUE_URL": spec["queue_url"],
            "TICKLOCK_RUNNER_TIMEOUT": "120",
            "TICKLOCK_MAX_RESUMES": "0",
            "TICKLOCK_MAX_RECEIVES": str(spec["max_receives"]),
            "TICKLOCK_OWNER": owner,
            "TICKLOCK_LOG_LEVEL": "warning",
        }
    )


def _container(spec: dict[str, Any], owner: str) -> Any:
    from tests.support import handlers
    from ticklock.handlers.builtin import register as register_builtin
    from ticklock.handlers.contract import Registry
    from ticklock.runtimes import aws

    registry = Registry()
    register_builtin(registry)
    handlers.register(registry)
    return aws.build(_settings(spec, owner), registry=registry)


def runner_process(spec: dict[str, Any]) -> None:
    """One runner process: ``spec["environments"]`` environments fed by ``spec["pollers"]`` pollers until
    SIGTERM; then its counts and invocation intervals are written to ``spec["out"]``."""
    from tests.support.lambda_sqs import LambdaContext, sqs_event
    from ticklock.runtimes import aws

    box = _container(spec, f"runner-{os.getpid()}")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    environments: queue.SimpleQueue[Any] = queue.SimpleQueue()
    for _ in range(spec["environments"]):
        environments.put(dataclasses.replace(box, pool=ThreadPoolExecutor(aws.RUNNER_THREADS)))
    slots = threading.BoundedSemaphore(spec["environments"])
    invoker = ThreadPoolExecutor(spec["environments"], thread_name_prefix="invocation")
    rng = random.Random(spec["seed"])
    mutex = threading.Lock()
    stats: dict[str, Any] = {"invocations": 0, "failed": 0, "duplicates": 0, "twins": 0, "errors": 0, "undeleted": 0,
                             "intervals": []}  # fmt: skip
    arn = spec["queue_arn"]
    url = spec["queue_url"]
    local = threading.local()

    def client() -> PollerSQS:
        if not hasattr(local, "sqs"):
            local.sqs = PollerSQS(spec["endpoint"])
        return local.sqs  # type: ignore[no-any-return]

    def deliver(messages: list[dict[str, Any]]) -> None:
        env = environments.get()
        try:
            event = sqs_event(messages, arn)
            with mutex:
                twin = rng.random() < spec["twin_share"]
                again = [m["Body"] for m in messages if rng.random() < spec["duplicate_share"]]
            began = time.time()
            if twin:  # the same batch to a second environment at the same moment
                other = threading.Thread(target=aws.run_batch, args=(event, LambdaContext(timeout=120), box))
                other.start()
            answer = aws.run_batch(event, LambdaContext(timeout=120), env)
            if twin:
                other.join()
            ended = time.time()
            failed = {item["itemIdentifier"] for item in answer.get("batchItemFailures", [])}
            done = [m for m in messages if m["MessageId"] not in failed]
            sqs = client()
            undeleted = 0
            if done:
                deleted = sqs.call(
                    "DeleteMessageBatch",
                    {"QueueUrl": url, "Entries": [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                                                  for i, m in enumerate(done)]},
                )  # fmt: skip
                undeleted = len(deleted.get("Failed", []))
            if again:
                sqs.call(
                    "SendMessageBatch",
                    {"QueueUrl": url, "Entries": [{"Id": str(i), "MessageBody": b} for i, b in enumerate(again)]},
                )
            with mutex:
                stats["invocations"] += 1
                stats["undeleted"] += undeleted
                stats["failed"] += len(failed)
                stats["duplicates"] += len(again)
                stats["twins"] += twin
                stats["intervals"].append((began, ended))
        except Exception:  # noqa: BLE001 - counted, and the test fails on it: a dropped batch hides nothing
            traceback.print_exc()
            with mutex:
                stats["errors"] += 1
        finally:
            environments.put(env)
            slots.release()

    def poll() -> None:
        sqs = PollerSQS(spec["endpoint"])
        while not stop.is_set():
            if not slots.acquire(timeout=0.5):  # a poller waits for a free environment before it receives
                continue
            try:
                answer = sqs.call(
                    "ReceiveMessage",
                    {"QueueUrl": url, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1,
                     "AttributeNames": ["All"], "MessageSystemAttributeNames": ["All"]},
                )  # fmt: skip
            except (OSError, RuntimeError, http.client.HTTPException):
                slots.release()
                time.sleep(0.1)
                continue
            messages = answer.get("Messages", [])
            if not messages:
                slots.release()
                continue
            invoker.submit(deliver, messages)

    threads = [threading.Thread(target=poll, name=f"poller-{i}") for i in range(spec["pollers"])]
    for thread in threads:
        thread.start()
    stop.wait()
    for thread in threads:
        thread.join()
    invoker.shutdown()
    stats["skips"] = {  # the runner's own count of the fires it skipped, by reason (its metrics)
        sample.labels["reason"]: sample.value
        for family in box.metrics.registry.collect()
        if family.name == "ticklock_skips"
        for sample in family.samples
        if sample.name == "ticklock_skips_total"
    }
    Path(spec["out"]).write_text(json.dumps(stats))
    os._exit(0)  # the environments' pools and clients end with the process, as a Lambda environment does


def tick_process(spec: dict[str, Any]) -> None:
    """The tick function's loop, as two invocations handing over half-way; reports to ``spec["out"]``."""
    import boto3
    from botocore.config import Config

    from ticklock.adapters.queue.sqs import SQSQueue
    from ticklock.engine.dispatcher import Dispatcher
    from ticklock.engine.tick_loop import TickLoop, TickReport
    from ticklock.runtimes import aws

    box = _container(spec, "tick")
    sqs = boto3.client("sqs", endpoint_url=spec["endpoint"], region_name=REGION, config=Config(max_pool_connections=4),
                       **CREDENTIALS)  # fmt: skip
    seconds = float(spec["seconds"])
    reports: dict[str, TickReport] = {}

    def invocation(budget: float, key: str) -> None:
        dispatcher = Dispatcher(
            store=box.store,
            queue=SQSQueue(spec["queue_url"], client=sqs),
            clock=box.clock,
            metrics=box.metrics,
            owner=key,
            lease_slack=box.settings.lease_slack,
            send_ahead=aws.SEND_AHEAD,
        )
        loop = TickLoop(dispatcher=dispatcher, locker=box.locker, clock=box.clock, run_for=seconds / 2, overlap=2.0)
        reports[key] = loop.run(budget)

    first = threading.Thread(target=invocation, args=(seconds, "tick-1"))
    second = threading.Timer(seconds / 2 - 1, invocation, args=(seconds / 2 + 1, "tick-2"))
    began = time.time()
    first.start()
    second.start()
    first.join()
    second.join()
    out = {"began": began, "ended": time.time(), "reports": {k: r.as_dict() for k, r in reports.items()}}
    Path(spec["out"]).write_text(json.dumps(out))
    os._exit(0)


# -- the whole shape ------------------------------------------------------------------------------------
def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _spawn(role: str, spec: dict[str, Any], workdir: Path) -> subprocess.Popen[bytes]:
    path = workdir / f"{role}.json"
    path.write_text(json.dumps(spec))
    with (workdir / f"{role}.log").open("wb") as log:  # the child keeps its own descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "tests.support.lambda_shape", role.split("-")[0], str(path)],
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))},
        )  # fmt: skip


def run_shape(
    shape: Shape, *, endpoint: str, redis_url: str, workdir: Path, server_pids: dict[str, int] | None = None
) -> Result:
    """Queues made, jobs stored, the tick and runner processes run for ``shape.seconds``, the queue drained;
    then everything measured is read back. ``server_pids`` (MiniStack, Redis...) have their CPU counted."""
    import boto3

    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name=REGION, **CREDENTIALS)
    name = f"fires-{uuid.uuid4().hex[:6]}"
    dlq_url = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(shape.max_receives)}
    queue_url = sqs.create_queue(
        QueueName=name,
        Attributes={"VisibilityTimeout": str(shape.visibility_timeout), "RedrivePolicy": json.dumps(redrive)},
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    calls = workdir / "calls"
    spec: dict[str, Any] = {
        "endpoint": endpoint, "redis": redis_url, "db": str(workdir / "shape.db"), "queue_url": queue_url,
        "queue_arn": queue_arn, "max_receives": shape.max_receives, "seconds": shape.seconds,
        "duplicate_share": shape.duplicate_share, "twin_share": shape.twin_share, "pollers": shape.pollers,
    }  # fmt: skip
    box = _container(spec, "seed")
    # the runners start (and warm up) first; the jobs' first fires are a few seconds later
    per_process = [shape.concurrency // shape.processes + (i < shape.concurrency % shape.processes)
                   for i in range(shape.processes)]  # fmt: skip
    runners: list[subprocess.Popen[bytes]] = []
    ticks: list[subprocess.Popen[bytes]] = []  # the tick process, once ``_drive`` has started it
    try:
        for i, n in enumerate(per_process):
            out = str(workdir / f"runner-{i}.out")
            runners.append(_spawn(f"runner-{i}", {**spec, "environments": n, "seed": i, "out": out}, workdir))
        window, cpu, rss, drained = _drive(shape, spec, box, sqs, queue_url, calls, workdir, runners, ticks,
                                           server_pids or {})  # fmt: skip
        _stop(runners, workdir)  # each writes its counts as it stops
        return _measure(shape, box, sqs, dlq_url, calls, workdir, window, cpu, rss, drained)
    finally:
        for process in ticks:
            if process.poll() is None:
                process.kill()
        _stop(runners, workdir)
        box.close()


def _stop(runners: list[subprocess.Popen[bytes]], workdir: Path) -> None:
    """SIGTERM to the runner processes still running, then wait for them (killed after 60 s: an error)."""
    live = [(i, r) for i, r in enumerate(runners) if r.poll() is None]
    for _, runner in live:
        runner.send_signal(signal.SIGTERM)
    stuck = []
    for i, runner in live:
        try:
            runner.wait(60)
        except subprocess.TimeoutExpired:
            runner.kill()
            stuck.append((workdir / f"runner-{i}.log").read_text()[-3000:])
    if stuck:
        raise AssertionError("a runner process did not stop:\n" + stuck[0])


def _drive(
    shape: Shape,
    spec: dict[str, Any],
    box: Any,
    sqs: Any,
    queue_url: str,
    calls: Path,
    workdir: Path,
    runners: list[subprocess.Popen[bytes]],
    ticks: list[subprocess.Popen[bytes]],
    server_pids: dict[str, int],
) -> tuple[tuple[datetime, datetime], dict[str, float], dict[str, float], bool]:
    """Jobs stored, the tick started, CPU sampled at the window's edges, then the queue drained."""
    from tests.support.factories import make_job
    from ticklock.domain.schedules import IntervalSchedule

    start = box.clock.now() + timedelta(seconds=4)
    box.store.add_jobs(
        [
            make_job(
                f"load-{i:04d}",
                handler="test.record",
                schedule=IntervalSchedule(1),
                payload={"path": str(calls)},
                next_run_at=start + timedelta(microseconds=1_000_000 * i // shape.jobs),
            )
            for i in range(shape.jobs)
        ]
    )
    time.sleep(max(0.0, (start - box.clock.now()).total_seconds() - 1.5))
    tick = _spawn("tick", {**spec, "out": str(workdir / "tick.out")}, workdir)
    ticks.append(tick)
    pids = {"tick": tick.pid, **{f"runner-{i}": p.pid for i, p in enumerate(runners)}, **server_pids}
    # the window: from 5 s after the first fire to 5 s before the tick's end
    window_start = start + timedelta(seconds=5)
    window_end = start + timedelta(seconds=shape.seconds - 5)
    time.sleep(max(0.0, (window_start - box.clock.now()).total_seconds()))
    cpu_before = {k: _cpu(p) for k, p in pids.items()}
    time.sleep(max(0.0, (window_end - box.clock.now()).total_seconds()))
    cpu = {k: _cpu(p) - cpu_before[k] for k, p in pids.items()}
    rss = {k: _rss_mb(p) for k, p in pids.items()}
    assert tick.wait(shape.seconds + 60) == 0, (workdir / "tick.log").read_text()[-3000:]
    deadline, drained = time.monotonic() + 120, False
    while time.monotonic() < deadline and not drained:  # let the runners finish what was queued
        attrs = sqs.get_queue_attributes(
            QueueUrl=queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        drained = attrs["ApproximateNumberOfMessages"] == "0" and attrs["ApproximateNumberOfMessagesNotVisible"] == "0"
        time.sleep(0 if drained else 0.5)
    return (window_start, window_end), cpu, rss, drained


def _measure(
    shape: Shape,
    box: Any,
    sqs: Any,
    dlq_url: str,
    calls: Path,
    workdir: Path,
    window: tuple[datetime, datetime],
    cpu: dict[str, float],
    rss: dict[str, float],
    drained: bool,
) -> Result:
    window_start, window_end = window
    stats = [json.loads((workdir / f"runner-{i}.out").read_text()) for i in range(shape.processes)]
    ticked = json.loads((workdir / "tick.out").read_text())
    dead = 0
    while batch := sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages"):
        dead += len(batch)

    lines = [json.loads(line) for line in calls.read_text().splitlines()]
    fires = Counter((c["job_id"], c["scheduled_at"]) for c in lines)
    per_job: dict[str, list[datetime]] = defaultdict(list)
    for job_id, at in fires:
        per_job[job_id].append(datetime.fromisoformat(at))
    for times in per_job.values():
        times.sort()
    in_window = [at for times in per_job.values() for at in times if window_start <= at < window_end]
    seconds = Counter(int(at.timestamp()) for at in in_window)
    first_second, last_second = int(window_start.timestamp()) + 1, int(window_end.timestamp()) - 1
    executions = [
        e for job in box.store.list_jobs(limit=shape.jobs) for e in box.store.list_executions(job.id, limit=1000)
    ]
    lags = sorted(
        (e.started_at - e.scheduled_at).total_seconds()
        for e in executions
        if e.started_at is not None and window_start <= e.scheduled_at < window_end
    )
    spans = [(a, b) for s in stats for a, b in s["intervals"]]
    edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])  # an end before a start at one instant
    in_flight = most = 0
    for _, step in edges:
        in_flight += step
        most = max(most, in_flight)
    lo, hi = window_start.timestamp(), window_end.timestamp()
    busy = sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in spans)
    return Result(
        shape=shape,
        ticked=ticked["ended"] - ticked["began"],
        fires=fires,
        per_job=dict(per_job),
        window_fires=len(in_window),
        window_seconds=(window_end - window_start).total_seconds(),
        slowest_second=min((seconds.get(s, 0) for s in range(first_second, last_second)), default=0),
        lags=lags,
        tick_reports=ticked["reports"],
        invocations=sum(s["invocations"] for s in stats),
        most_in_flight=most,
        mean_in_flight=busy / (hi - lo),
        mean_invocation=statistics.fmean(b - a for a, b in spans) if spans else 0.0,
        duplicates_sent=sum(s["duplicates"] for s in stats),
        twins=sum(s["twins"] for s in stats),
        records_failed=sum(s["failed"] for s in stats),
        dead_lettered=dead,
        cpu=cpu,
        executions=Counter((e.job_id, e.scheduled_at.isoformat()) for e in executions),
        statuses=Counter(e.status.value for e in executions),
        errors=sum(s["errors"] for s in stats),
        undeleted=sum(s["undeleted"] for s in stats),
        drained=drained,
        skips=sum((Counter(s.get("skips", {})) for s in stats), Counter()),
        rss_mb=rss,
    )


def chains_hold(result: Result) -> bool:
    """Each job's fires are at least its interval apart (an interval counts from the end of a run)."""
    return all((b - a).total_seconds() >= 1.0 for times in result.per_job.values() for a, b in pairwise(times))


def summary(result: Result) -> str:
    cpu = ", ".join(f"{k} {v / result.window_seconds * 100:.0f} %" for k, v in result.cpu.items())
    return (
        f"{result.window_fires} fires in the {result.window_seconds:.0f} s window "
        f"({result.fires_per_second:.0f}/s, slowest second {result.slowest_second}), "
        f"lag p50 {result.lag(0.5) * 1000:.0f} ms p99 {result.lag(0.99) * 1000:.0f} ms "
        f"max {result.lag(1.0) * 1000:.0f} ms; {result.invocations} invocations, at most {result.most_in_flight} "
        f"at once, {result.mean_in_flight:.1f} on average, {result.mean_invocation * 1000:.0f} ms each; "
        f"{result.duplicates_sent} duplicates sent, {result.twins} twin deliveries, "
        f"{result.records_failed} records failed, {result.dead_lettered} dead-lettered; "
        f"skipped {dict(result.skips)}; CPU of one core: {cpu}"
    )


if __name__ == "__main__":
    role, spec_path = sys.argv[1], sys.argv[2]
    {"runner": runner_process, "tick": tick_process}[role](json.loads(Path(spec_path).read_text()))
