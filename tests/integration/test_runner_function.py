"""The runner function's batch handling: tick -> real SQS queue (moto server) -> runner -> executions."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import boto3

from tests.support import handlers
from tests.support.factories import make_job
from tests.support.lambda_sqs import sqs_event
from tests.support.recorders import RecordingMetrics
from ticklock.adapters.queue.sqs import SQSQueue, sqs_client
from ticklock.clock import SystemClock
from ticklock.domain.dispatcher import Dispatcher
from ticklock.domain.jobs import ExecutionStatus
from ticklock.handlers.builtin import register as register_builtin
from ticklock.handlers.contract import Registry
from ticklock.runtimes.aws import build, run_batch
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
