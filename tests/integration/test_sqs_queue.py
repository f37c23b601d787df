"""The SQS FireQueue on moto server: fires go out ten to a batch and come back whole."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest

from tests.support.factories import T0, make_job
from tests.support.servers import free_port
from ticklock.adapters.queue.sqs import SQSQueue, decode_fire, sqs_client
from ticklock.domain.fires import Fire, Lease, Trigger
from ticklock.domain.schedules import CronSchedule
from ticklock.errors import QueueUnavailable


def make_fire(i: int) -> Fire:
    job = make_job(f"job-{i}", schedule=CronSchedule("*/5 * * * * *", "Europe/London"), payload={"i": i, "x": [1]})
    job = job.with_changes(lease=Lease(f"token-{i}", "tick", T0))
    return Fire(job, T0, Trigger.SCHEDULE if i % 2 else Trigger.MANUAL, f"token-{i}")


def receive_all(client: Any, url: str, expect: int) -> list[str]:
    bodies: list[str] = []
    for _ in range(30):
        answer = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
        bodies += [m["Body"] for m in answer.get("Messages", [])]
        if len(bodies) >= expect:
            break
    return bodies


def test_fires_are_sent_in_batches_of_ten_and_decode_to_what_was_sent(moto_endpoint: str) -> None:
    client = boto3.client("sqs", endpoint_url=moto_endpoint, region_name="us-east-1")
    url = client.create_queue(QueueName=f"fires-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    calls: list[int] = []
    real = sqs_client(moto_endpoint)

    class Counting:
        def send_message_batch(self, **kw: Any) -> Any:
            calls.append(len(kw["Entries"]))
            return real.send_message_batch(**kw)

    queue = SQSQueue(url, client=Counting())
    fires = [make_fire(i) for i in range(25)]
    for fire in fires:
        queue.submit(fire)
    assert calls == [10, 10]  # the last five wait for flush
    queue.flush()
    assert calls == [10, 10, 5]
    got = sorted((decode_fire(b) for b in receive_all(client, url, 25)), key=lambda f: f.job.name)
    assert sorted(got, key=lambda f: f.key) == sorted(fires, key=lambda f: f.key)


def test_a_queue_that_cannot_be_reached_names_the_fires_it_could_not_send() -> None:
    queue = SQSQueue("http://127.0.0.1/000000000000/none", client=sqs_client(f"http://127.0.0.1:{free_port()}"))
    queue.submit(make_fire(1))
    with pytest.raises(QueueUnavailable) as caught:
        queue.flush()
    assert [f.job.name for f in caught.value.fires] == ["job-1"]
