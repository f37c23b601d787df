"""The deployed stack, through its own endpoints: the API behind the emulator's API Gateway (signed as
the CLI signs), the schedule firing the tick function, fires crossing SQS to the runner function through
the event source mapping, executions in the store one per fire, events on the bus reaching a rule's
target, and a duplicate fire message absorbed."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.credentials import Credentials

from tests.deployed.conftest import REGION, Stack
from ticklock.adapters.queue.sqs import encode_fire
from ticklock.adapters.store.mongo import MongoStore
from ticklock.commands.client import ApiClient, ApiError
from ticklock.commands.sigv4 import Signer, SigV4
from ticklock.domain.jobs import Fire, Trigger

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]


def api(stack: Stack) -> ApiClient:
    return ApiClient(stack.api, auth=SigV4(Signer(Credentials("test", "test"), REGION)), timeout=30)


def wait_for(check: Callable[[], Any], timeout: float = 90, every: float = 0.5) -> Any:
    ends = time.monotonic() + timeout
    value = None
    while time.monotonic() < ends:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"not met in {timeout} s; last value: {value!r}")


def store(ferretdb_uri: str) -> MongoStore:
    return MongoStore(ferretdb_uri, database="deployed")


def queue_depth(stack: Stack, url: str) -> int:
    attributes = stack.client("sqs").get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def test_the_api_answers_through_the_gateway_with_the_functions_rules(stack: Stack) -> None:
    import httpx

    health = httpx.get(f"{stack.api}/health", timeout=30)  # open, as the template says (Authorizer: NONE)
    assert health.status_code == 200 and health.json()["status"] == "ok", health.text
    client = api(stack)
    try:
        with pytest.raises(ApiError) as refused:  # a timeout the runner (60 s, 30 kept) cannot honour
            client.call("POST", "/jobs", body={"name": "too-long", "handler": "noop", "timeout": 60,
                                                "schedule": {"kind": "interval", "seconds": 3600}})  # fmt: skip
        assert refused.value.status == 422 and "at most 30 seconds" in refused.value.message
        made = client.call("POST", "/jobs", body={"name": "by-the-gateway", "handler": "noop", "timeout": 10,
                                                  "schedule": {"kind": "interval", "seconds": 3600}})  # fmt: skip
        listed = client.call("GET", "/jobs", params={"q": "by-the"})
        assert [j["id"] for j in listed["items"]] == [made["id"]]
        client.call("POST", f"/jobs/{made['id']}/trigger")
        runs = wait_for(lambda: client.call("GET", f"/jobs/{made['id']}/executions")["items"])
        assert [(r["trigger"], r["status"]) for r in runs] == [("manual", "success")]
    finally:
        client.close()
    unsigned = httpx.get(f"{stack.api}/jobs", timeout=30)
    assert unsigned.status_code == 403  # IAM on every other route: no Authorization, no answer


def test_the_schedule_ticks_and_each_fire_runs_once_with_its_events(stack: Stack, ferretdb_uri: str) -> None:
    events, sqs = stack.client("events"), stack.client("sqs")
    target = sqs.create_queue(QueueName="execution-events")["QueueUrl"]
    target_arn = sqs.get_queue_attributes(QueueUrl=target, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    bus = stack.outputs["EventBusName"]
    events.put_rule(Name="to-a-queue", EventBusName=bus, EventPattern=json.dumps({"source": ["ticklock"]}))
    events.put_targets(Rule="to-a-queue", EventBusName=bus, Targets=[{"Id": "q", "Arn": target_arn}])
    client = api(stack)
    try:
        job = client.call("POST", "/jobs", body={"name": "every-two", "handler": "noop", "timeout": 5,
                                                 "schedule": {"kind": "cron", "expr": "*/2 * * * * *"}})  # fmt: skip
        kept = store(ferretdb_uri)
        try:
            ran = wait_for(lambda: len(kept.list_executions(job["id"], limit=100)) >= 8 or None, timeout=180)
            assert ran
            client.call("POST", f"/jobs/{job['id']}/pause")
            time.sleep(5)  # the fires already queued finish
            runs = kept.list_executions(job["id"], limit=500)
        finally:
            kept.close()
    finally:
        client.close()
    slots = sorted(r.scheduled_at for r in runs)
    assert len(slots) == len(set(slots)), "a fire ran twice"
    assert {r.status.value for r in runs} == {"success"}
    # every slot of */2 between the first run and the last is accounted for: it ran, or the ledger says
    # why not (a late tick collapses what it missed); none is unaccounted
    client = api(stack)
    try:
        window = {"from": slots[0].isoformat(), "to": slots[-1].isoformat(), "limit": 1000}
        fates = client.call("GET", f"/jobs/{job['id']}/fires", params=window)["items"]
    finally:
        client.close()
    assert len(fates) == int((slots[-1] - slots[0]).total_seconds()) // 2 + 1
    assert {f["status"] for f in fates} <= {"ran", "skipped", "missed"}, fates
    assert sum(f["status"] == "ran" for f in fates) == len(slots)
    assert queue_depth(stack, stack.outputs["DeadLetterQueueUrl"]) == 0

    def finished() -> list[dict[str, Any]]:
        got = sqs.receive_message(QueueUrl=target, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
        seen.extend(json.loads(m["Body"]) for m in got)
        return [e for e in seen if e.get("detail", {}).get("job_id") == job["id"]]

    seen: list[dict[str, Any]] = []
    # each run's started and succeeded events, through the bus and the rule, to the rule's target
    wait_for(lambda: len(finished()) >= 2 * len(runs) or None, timeout=60)
    mine = finished()
    assert {e["detail-type"] for e in mine} == {"job.execution.started", "job.execution.succeeded"}
    assert sum(e["detail-type"] == "job.execution.succeeded" for e in mine) == len(runs)


def test_a_duplicate_fire_message_is_absorbed(stack: Stack, ferretdb_uri: str) -> None:
    client = api(stack)
    try:
        job = client.call("POST", "/jobs", body={"name": "once-only", "handler": "noop", "timeout": 5,
                                                 "schedule": {"kind": "cron", "expr": "*/3 * * * * *"}})  # fmt: skip
        kept = store(ferretdb_uri)
        try:
            [first, *_] = wait_for(lambda: kept.list_executions(job["id"], limit=10))
            client.call("POST", f"/jobs/{job['id']}/pause")
            stored = kept.get_job(job["id"])
            # the same fire again, as SQS's at-least-once delivery or a replayed message brings it
            duplicate = Fire(stored, first.scheduled_at, Trigger.SCHEDULE, "a-duplicate")
            stack.client("sqs").send_message(QueueUrl=stack.outputs["FireQueueUrl"], MessageBody=encode_fire(duplicate))
            wait_for(lambda: queue_depth(stack, stack.outputs["FireQueueUrl"]) == 0, timeout=60)
            again = [e for e in kept.list_executions(job["id"], limit=100) if e.scheduled_at == first.scheduled_at]
        finally:
            kept.close()
    finally:
        client.close()
    assert [e.id for e in again] == [first.id]  # still the one execution of that fire
    assert queue_depth(stack, stack.outputs["DeadLetterQueueUrl"]) == 0
    assert datetime.now(UTC) - first.scheduled_at < timedelta(minutes=10)


def test_no_secret_value_is_in_any_functions_configuration(stack: Stack, ferretdb_uri: str, redis_url: str) -> None:
    lambdas = stack.client("lambda")
    for output in ("TickFunctionName", "RunnerFunctionName", "ApiFunctionName"):
        variables = lambdas.get_function_configuration(FunctionName=stack.outputs[output])["Environment"]["Variables"]
        assert (variables["TICKLOCK_STORE_SECRET"], variables["TICKLOCK_LOCK_SECRET"]) == (
            "ticklock/store-uri",
            "ticklock/redis-url",
        )
        values = " ".join(variables.values())
        assert ferretdb_uri.split("//")[1] not in values and redis_url.split("//")[1] not in values, variables
        assert "TICKLOCK_STORE" not in variables and "TICKLOCK_LOCK" not in variables


def test_a_rotated_secret_reaches_a_new_environment_without_a_redeploy(stack: Stack, ferretdb_uri: str) -> None:
    """The store's secret rotated to another database: the API function's next environment reads it
    (started here by changing its memory size, as on AWS; there environments are also recycled by
    themselves). The stack is not redeployed, and no variable changes."""
    secrets, lambdas = stack.client("secretsmanager"), stack.client("lambda")
    name = stack.outputs["ApiFunctionName"]
    client = api(stack)

    def new_environment() -> None:
        # a change of memory size starts new environments (on AWS too); a description alone would not
        memory = lambdas.get_function_configuration(FunctionName=name)["MemorySize"]
        lambdas.update_function_configuration(FunctionName=name, MemorySize=576 if memory == 512 else 512)

    try:
        before = client.call("GET", "/jobs", params={"limit": 500})["items"]
        assert before, "the earlier tests' jobs"
        secrets.put_secret_value(SecretId="ticklock/store-uri", SecretString=f"{ferretdb_uri}rotated")
        new_environment()
        after = wait_for(lambda: client.call("GET", "/jobs", params={"limit": 500})["items"] != before or None)
        assert after
        names = {j["name"] for j in client.call("GET", "/jobs", params={"limit": 500})["items"]}
        assert names <= {"system:alerts.scan"}  # the other database: only what a cold start seeds
    finally:
        secrets.put_secret_value(SecretId="ticklock/store-uri", SecretString=f"{ferretdb_uri}deployed")
        new_environment()
        client.close()
    stack_events = stack.client("cloudformation").describe_stacks(StackName="ticklock")["Stacks"][0]
    assert stack_events["StackStatus"] == "CREATE_COMPLETE"  # never updated: no redeploy
