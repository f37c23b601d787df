"""The EventBridge publisher on moto server, and Pushgateway metrics on a real Pushgateway."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import boto3
import httpx

from tests.integration.conftest import Harness
from tests.support.servers import free_port
from ticklock.adapters.events.eventbridge import EventBridgePublisher, events_client
from ticklock.adapters.metrics.pushgateway import PushgatewayMetrics, delete_stale_groups
from ticklock.domain.executions import ExecutionStatus


def bus_with_queue(endpoint: str) -> tuple[str, Any, str]:
    """A bus, and an SQS queue that a rule on it feeds: reading the queue shows what reached the bus."""
    events = boto3.client("events", endpoint_url=endpoint, region_name="us-east-1")
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
    bus = f"bus-{uuid.uuid4().hex[:8]}"
    events.create_event_bus(Name=bus)
    queue_url = sqs.create_queue(QueueName=f"q-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="all", EventBusName=bus, EventPattern=json.dumps({"source": ["ticklock"]}))
    events.put_targets(Rule="all", EventBusName=bus, Targets=[{"Id": "q", "Arn": arn}])
    return bus, sqs, queue_url


def drain(sqs: Any, queue_url: str, expect: int) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    for _ in range(50):
        answer = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
        got += [json.loads(m["Body"]) for m in answer.get("Messages", [])]
        if len(got) >= expect:
            break
        time.sleep(0.1)
    return got


def test_execution_events_reach_the_bus(fake: Harness, moto_endpoint: str) -> None:
    bus, sqs, queue_url = bus_with_queue(moto_endpoint)
    publisher = EventBridgePublisher(bus, client=events_client(moto_endpoint))
    job = fake.add("test.fail", payload={"message": "boom"}, max_retries=1, timeout=600)
    outcome = fake.runner(publisher=publisher).run(fake.claim_one())
    publisher.close()
    assert outcome.execution is not None
    messages = drain(sqs, queue_url, 2)
    assert [m["detail-type"] for m in messages] == ["job.execution.started", "job.execution.failed"]
    detail = messages[1]["detail"]
    assert detail["job_id"] == job.id
    assert detail["execution_id"] == outcome.execution.id
    assert detail["attempt"] == 2
    assert detail["error"] == "RuntimeError: boom"
    assert detail["fire_time"] == outcome.execution.scheduled_at.isoformat()
    assert detail["duration"] is not None
    assert publisher.dropped == 0


def test_a_bus_outage_never_blocks_or_fails_a_run(fake: Harness) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens
    drops: list[int] = []
    publisher = EventBridgePublisher("nowhere", client=events_client(dead), on_drop=drops.append)
    job = fake.add("noop")
    outcome = fake.runner(publisher=publisher).run(fake.claim_one())
    assert outcome.execution is not None
    assert fake.store.get_execution(outcome.execution.id).status is ExecutionStatus.SUCCESS
    assert fake.store.get_job(job.id).lease is None
    publisher.flush(30)
    assert publisher.dropped == 2
    assert sum(drops) == 2
    publisher.close()


def groups(url: str) -> dict[str, dict[str, Any]]:
    data = httpx.get(f"{url}/api/v1/metrics").json()["data"]
    return {g["labels"]["instance"]: g for g in data if g["labels"].get("job") == "ticklock"}


def executions_total(group: dict[str, Any]) -> float:
    return sum(float(m["value"]) for m in group["ticklock_executions_total"]["metrics"])


def test_concurrent_pushers_keep_their_own_counts(pushgateway_url: str) -> None:
    tag = uuid.uuid4().hex[:6]
    pushers = [PushgatewayMetrics(pushgateway_url, f"env-{tag}-{i}") for i in range(2)]
    counts = [37, 23]
    start = threading.Barrier(2)

    def work(metrics: PushgatewayMetrics, n: int) -> None:
        start.wait()
        for _ in range(n):
            metrics.fire_finished("noop", "success", 0.01, 1)
            metrics.flush()  # as each Lambda invocation does, interleaved with the other environment's

    threads = [threading.Thread(target=work, args=(p, n)) for p, n in zip(pushers, counts, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    seen = groups(pushgateway_url)
    assert executions_total(seen[f"env-{tag}-0"]) == 37
    assert executions_total(seen[f"env-{tag}-1"]) == 23


def test_stale_groups_are_deleted_and_live_ones_kept(pushgateway_url: str) -> None:
    tag = uuid.uuid4().hex[:6]
    old, live = PushgatewayMetrics(pushgateway_url, f"old-{tag}"), PushgatewayMetrics(pushgateway_url, f"live-{tag}")
    old.fire_skipped("noop", "lock_held")
    old.flush()
    time.sleep(1.5)
    live.fire_skipped("noop", "lock_held")
    live.flush()
    removed = delete_stale_groups(pushgateway_url, stale_after=1.0)
    assert f"old-{tag}" in removed
    assert f"live-{tag}" not in removed
    seen = groups(pushgateway_url)
    assert f"old-{tag}" not in seen
    assert f"live-{tag}" in seen


def test_a_pushgateway_outage_is_logged_not_raised() -> None:
    metrics = PushgatewayMetrics(f"http://127.0.0.1:{free_port()}", "lonely", timeout=0.5)
    metrics.fire_finished("noop", "success", 0.1, 1)
    metrics.flush()
    assert delete_stale_groups(f"http://127.0.0.1:{free_port()}", stale_after=1, timeout=0.5) == []
