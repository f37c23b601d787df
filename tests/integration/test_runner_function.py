"""The runner function's batch handling: tick -> real SQS queue (moto server) -> runner -> executions."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3

from tests.support import handlers
from tests.support.factories import make_job
from tests.support.lambda_sqs import sqs_event
from tests.support.recorders import RecordingMetrics
from ticklock.adapters.queue.sqs import SQSQueue, decode_fire, sqs_client
from ticklock.clock import Clock, FakeClock, SystemClock
from ticklock.domain.executions import ExecutionStatus
from ticklock.engine.dispatcher import Dispatcher
from ticklock.handlers.builtin import register as register_builtin
from ticklock.handlers.contract import HandlerContext, Registry
from ticklock.runtimes.aws import SEND_AHEAD, Container, build, run_batch
from ticklock.settings import Settings


def test_fires_go_through_sqs_and_a_poison_message_fails_alone(moto_endpoint: str, tmp_path: Path) -> None:
    client = boto3.client("sqs", endpoint_url=moto_endpoint, region_name="us-east-1")
    url = client.create_queue(QueueName=f"fires-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    settings = Settings.load(environ={"TICKLOCK_DB": str(tmp_path / "t.db"), "TICKLOCK_QUEUE_URL": url})
    registry = Registry()
    register_builtin(registry)
    handlers.register(registry)
    box = build(settings, registry=registry)
    calls = tmp_path / "calls"
    clock = SystemClock()
    for i in range(7):
        box.store.add_job(
            make_job(f"job-{i}", handler="test.record", payload={"path": str(calls)}, next_run_at=clock.now())
        )
    tick = Dispatcher(
        store=box.store,
        queue=SQSQueue(url, client=sqs_client(moto_endpoint)),
        clock=clock,
        metrics=RecordingMetrics(),
        owner="tick",
    )
    assert tick.claim(clock.now())[0] == 7
    assert tick.release_due(clock.now()) == 7
    client.send_message(QueueUrl=url, MessageBody="not a fire")
    messages: list[dict[str, Any]] = []
    for _ in range(10):
        messages += client.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if len(messages) >= 8:
            break
    poison = next(m["MessageId"] for m in messages if m["Body"] == "not a fire")

    answer = run_batch(sqs_event(messages, arn), None, box)
    assert answer == {"batchItemFailures": [{"itemIdentifier": poison}]}
    assert len(calls.read_text().splitlines()) == 7
    # SQS delivers at least once: the same batch again runs nothing
    assert run_batch(sqs_event(messages, arn), None, box) == {"batchItemFailures": [{"itemIdentifier": poison}]}
    assert len(calls.read_text().splitlines()) == 7
    for job in box.store.list_jobs():
        [execution] = box.store.list_executions(job.id)
        assert execution.status is ExecutionStatus.SUCCESS
    box.store.close()


# -- the batch's rules, each pinned on its own --------------------------------------------------------------
def make_box(tmp_path: Path, clock: Clock, registry: Registry | None = None) -> Container:
    settings = Settings.load(environ={"TICKLOCK_DB": str(tmp_path / "t.db"), "TICKLOCK_MAX_RECEIVES": "3"})
    if registry is None:
        registry = Registry()
        register_builtin(registry)
        handlers.register(registry)
    return build(settings, clock=clock, registry=registry)


def queued(box: Container, endpoint: str) -> tuple[list[dict[str, Any]], str]:
    """The due jobs' fires, claimed and sent as the tick does, received from a queue of their own."""
    client = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
    url = client.create_queue(QueueName=f"fires-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    tick = Dispatcher(
        store=box.store, queue=SQSQueue(url, client=sqs_client(endpoint)), clock=box.clock,
        metrics=RecordingMetrics(), owner="tick",
    )  # fmt: skip
    tick.claim(box.clock.now())
    sent = tick.release_due(box.clock.now() + timedelta(seconds=1))
    messages: list[dict[str, Any]] = []
    while len(messages) < sent:
        messages += client.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return messages, arn


def test_a_batch_whose_records_all_fail_is_answered_record_by_record(moto_endpoint: str, tmp_path: Path) -> None:
    """Every record failed: each is listed (no error for the whole batch), and the one on its last
    delivery is recorded LOST and its job advanced, while the one with deliveries left is untouched."""
    box = make_box(tmp_path, SystemClock())
    last, early = (box.store.add_job(make_job(n, handler="test.record", next_run_at=box.clock.now())) for n in "ab")
    real_acquire = box.locker.acquire

    def acquire(key: str, ttl: float) -> str | None:
        if key in (f"job:{last.id}", f"job:{early.id}"):
            raise RuntimeError("a bug that fails this fire every time")
        return real_acquire(key, ttl)

    box.locker.acquire = acquire  # type: ignore[method-assign]
    messages, arn = queued(box, moto_endpoint)
    messages.append({"MessageId": "garbled", "ReceiptHandle": "r", "Body": "not a fire"})
    event = sqs_event(messages, arn)
    for record in event["Records"]:
        last_delivery = record["body"] != "not a fire" and decode_fire(record["body"]).job.id == last.id
        record["attributes"]["ApproximateReceiveCount"] = "3" if last_delivery else "1"

    answer = run_batch(event, None, box)
    assert sorted(item["itemIdentifier"] for item in answer["batchItemFailures"]) == sorted(
        r["messageId"] for r in event["Records"]
    )
    [lost] = box.store.list_executions(last.id)
    assert lost.status is ExecutionStatus.LOST and lost.error is not None
    assert "dead-lettered after 3 deliveries" in lost.error
    assert box.store.get_job(last.id).next_run_at != last.next_run_at
    assert box.store.list_executions(early.id) == []
    box.close()


def test_the_records_of_a_batch_run_at_once(moto_endpoint: str, tmp_path: Path) -> None:
    """Ten records, each a handler that waits for the other nine: the batch succeeds only if all ten run at
    the same time (the runner's timeout bounds one job, not a batch of them)."""
    together = threading.Barrier(10, timeout=20)

    def meet(ctx: HandlerContext) -> None:
        together.wait()

    registry = Registry()
    register_builtin(registry)
    registry.register("test.meet", meet)
    box = make_box(tmp_path, SystemClock(), registry)
    jobs = [
        box.store.add_job(make_job(f"meet-{i}", handler="test.meet", timeout=30, next_run_at=box.clock.now()))
        for i in range(10)
    ]
    messages, arn = queued(box, moto_endpoint)
    assert run_batch(sqs_event(messages, arn), None, box) == {"batchItemFailures": []}
    for job in jobs:
        [execution] = box.store.list_executions(job.id)
        assert execution.status is ExecutionStatus.SUCCESS, execution.error
    box.close()


def test_a_fire_sent_ahead_starts_at_its_time(moto_endpoint: str, tmp_path: Path) -> None:
    clock = FakeClock(SystemClock().now())
    box = make_box(tmp_path, clock)
    due = clock.now() + timedelta(seconds=SEND_AHEAD)
    job = box.store.add_job(make_job("ahead", next_run_at=due))
    messages, arn = queued(box, moto_endpoint)
    assert run_batch(sqs_event(messages, arn), None, box) == {"batchItemFailures": []}
    [execution] = box.store.list_executions(job.id)
    assert execution.status is ExecutionStatus.SUCCESS
    assert execution.started_at >= due
    box.close()


def test_a_batch_without_records_is_answered_with_no_failures(tmp_path: Path) -> None:
    """What an invocation that warms an environment sends (the processor itself refuses such an event)."""
    box = make_box(tmp_path, SystemClock())
    assert run_batch({"Records": []}, None, box) == {"batchItemFailures": []}
    assert run_batch({}, None, box) == {"batchItemFailures": []}
    box.close()
