"""The three Lambda functions, invoked in-process as Lambda would, against real servers: SQS and EventBridge
on moto server, the store on FerretDB (PostgreSQL backend), the locks on Redis.

Lambda's SQS poller is played by ``EventSourceMapping`` (tests/support/lambda_sqs.py): it receives with
the real ``ApproximateReceiveCount``, deletes what the function did not report as failed, and the queue's
real redrive policy (maxReceiveCount 3) moves a message that keeps failing to the dead-letter queue.
"""

from __future__ import annotations

import io
import json
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from pymongo import MongoClient

from tests.support import handlers
from tests.support.factories import make_job
from tests.support.lambda_sqs import ROOT, EventSourceMapping, LambdaContext, function_module
from tests.support.recorders import RecordingMetrics
from ticklock.adapters.queue.sqs import SQSQueue, decode_fire, sqs_client
from ticklock.clock import FakeClock, SystemClock
from ticklock.domain.executions import Execution, ExecutionStatus
from ticklock.domain.fire_rules import run_token
from ticklock.domain.fires import Trigger
from ticklock.domain.job_settings import Overlap, Policy
from ticklock.domain.schedules import CronSchedule, IntervalSchedule
from ticklock.domain.service import JobService
from ticklock.engine.dispatcher import Dispatcher
from ticklock.handlers.builtin import register as register_builtin
from ticklock.handlers.contract import Registry
from ticklock.runtimes import aws
from ticklock.settings import Settings

pytestmark = pytest.mark.slow
EVENTS = ROOT / "events"


@dataclass
class Deployment:
    """What `sam deploy` would create, on moto server, plus the store and Redis."""

    sqs: Any
    queue_url: str
    dlq_url: str
    env: dict[str, str]

    def settings(self) -> Settings:
        return Settings.load(environ=self.env)

    def dead_letters(self) -> list[str]:
        answer = self.sqs.receive_message(QueueUrl=self.dlq_url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        return [m["Body"] for m in answer.get("Messages", [])]


@pytest.fixture
def deployment(
    moto_endpoint: str, ferretdb_pg_uri: str, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Deployment]:
    sqs = boto3.client("sqs", endpoint_url=moto_endpoint, region_name="us-east-1")
    suffix = uuid.uuid4().hex[:8]
    dlq_url = sqs.create_queue(QueueName=f"fires-dlq-{suffix}")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "3"})
    queue_url = sqs.create_queue(
        QueueName=f"fires-{suffix}", Attributes={"VisibilityTimeout": "1", "RedrivePolicy": redrive}
    )["QueueUrl"]
    bus = f"executions-{suffix}"
    boto3.client("events", endpoint_url=moto_endpoint, region_name="us-east-1").create_event_bus(Name=bus)
    database = f"lambda{suffix}"
    env = {
        "TICKLOCK_STORE": f"{ferretdb_pg_uri.rstrip('/')}/{database}",
        "TICKLOCK_LOCK": redis_url,
        "TICKLOCK_QUEUE_URL": queue_url,
        "TICKLOCK_EVENTS": f"eventbridge:{bus}",
        "TICKLOCK_RUNNER_TIMEOUT": "120",
        "TICKLOCK_MAX_RESUMES": "0",
        "TICKLOCK_MAX_RECEIVES": "3",
        "TICKLOCK_HANDLER_MODULES": "tests.support.handlers",
        "TICKLOCK_LOG_LEVEL": "info",
        "TICKLOCK_FIRE_LOG": "each",  # as template.yaml sets it
        "AWS_ENDPOINT_URL": moto_endpoint,
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    aws.container.cache_clear()
    yield Deployment(sqs, queue_url, dlq_url, env)
    if aws.container.cache_info().currsize:
        aws.container().close()
    aws.container.cache_clear()
    root.handlers[:], root.level = saved
    client: MongoClient[dict[str, Any]] = MongoClient(ferretdb_pg_uri)
    client.drop_database(database)
    client.close()


def box_for(deployment: Deployment, *, clock: Any = None) -> aws.Container:
    registry = Registry()
    register_builtin(registry)
    handlers.register(registry)
    return aws.build(deployment.settings(), clock=clock or SystemClock(), registry=registry)


def tick_once(box: aws.Container, deployment: Deployment) -> int:
    """One claim and release, as the tick loop does each second; returns the fires sent."""
    tick = Dispatcher(
        store=box.store,
        queue=SQSQueue(deployment.queue_url, client=sqs_client()),
        clock=box.clock,
        metrics=RecordingMetrics(),
        owner="tick",
    )
    tick.claim(box.clock.now())
    return tick.release_due(box.clock.now() + timedelta(seconds=1))


@contextmanager
def polling(esm: EventSourceMapping) -> Iterator[None]:
    """Lambda's SQS poller, polling on a thread of its own while the block runs."""
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            esm.poll_once(wait=1)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        yield
    finally:
        stop.set()
        poller.join()


def starts(calls: Path) -> Counter[tuple[str, str]]:
    lines = calls.read_text().splitlines() if calls.exists() else []
    return Counter((c["job_id"], c["scheduled_at"]) for c in map(json.loads, lines))


def event(name: str) -> dict[str, Any]:
    return dict(json.loads((EVENTS / name).read_text()))


# -- the functions, with the sample events ------------------------------------------------------------------
def test_tick_function_then_runner_function_run_every_fire_once(deployment: Deployment, tmp_path: Path) -> None:
    tick_fn, runner_fn = function_module("tick"), function_module("runner")
    box = aws.container()
    calls = tmp_path / "calls"
    now = box.clock.now()
    jobs = [
        box.store.add_job(
            make_job(
                f"every-second-{i}",
                handler="test.record",
                schedule=IntervalSchedule(1),
                next_run_at=now,
                payload={"path": str(calls)},
            )
        )
        for i in range(10)
    ]
    # history past TICKLOCK_RETENTION_DAYS (30): the tick's minute of housekeeping prunes it
    idle = box.store.add_job(make_job("idle", next_run_at=None))
    then = now - timedelta(days=40)
    old = Execution(
        id=uuid.uuid4().hex,
        job_id=idle.id,
        fire_key=f"{idle.id}:old",
        handler="noop",
        trigger=Trigger.SCHEDULE,
        scheduled_at=then,
        started_at=then,
        deadline_at=then + timedelta(seconds=10),
        run_token="old",
        owner="long-gone",
    )
    box.store.start_execution(old)
    assert box.store.finish_execution(old.with_changes(status=ExecutionStatus.SUCCESS, finished_at=then))
    esm = EventSourceMapping(deployment.sqs, deployment.queue_url, runner_fn.handler)
    with polling(esm):
        # 4 s of the budget go to the loop: its hard deadline is the invocation's end, less the margin
        report = tick_fn.handler(event("tick.json"), LambdaContext(timeout=aws.TICK_MARGIN + 4))
    esm.drain(idle_polls=2)
    assert report["ran"] is True
    assert box.store.list_executions(idle.id) == []
    fired = starts(calls)
    assert set(fired.values()) == {1}  # every fire ran once
    assert {job_id for job_id, _ in fired} == {j.id for j in jobs}
    assert sum(fired.values()) >= 2 * len(jobs)  # the loop ticked on: a job fired more than once
    for job in jobs:
        assert all(e.status is ExecutionStatus.SUCCESS for e in box.store.list_executions(job.id))


def test_the_lambda_shape_accounts_for_every_slot_of_its_jobs_in_the_api_functions_fires(
    deployment: Deployment, tmp_path: Path
) -> None:
    """Jobs every second whose runs take 2.5 s, through the tick, SQS and the runner function: the api
    function's GET /jobs/{id}/fires gives every slot of the window one fate, none unaccounted, with the
    overlap reasons each job's policy gives."""
    tick_fn, runner_fn, api_fn = function_module("tick"), function_module("runner"), function_module("api")
    box = aws.container()
    now = box.clock.now()
    start = now.replace(microsecond=0) + timedelta(seconds=1)
    jobs = {
        overlap: box.store.add_job(
            make_job(
                f"slow-{overlap}",
                handler="test.sleep",
                schedule=CronSchedule("* * * * * *"),
                next_run_at=start,
                created_at=now,
                timeout=10,
                payload={"seconds": 2.5},
            ).with_changes(policy=Policy(overlap=Overlap(overlap)))
        )
        for overlap in ("skip", "buffer_one", "allow_all")
    }
    esm = EventSourceMapping(deployment.sqs, deployment.queue_url, runner_fn.handler)
    with polling(esm):
        tick_fn.handler(event("tick.json"), LambdaContext(timeout=aws.TICK_MARGIN + 6))
        service = JobService(box.store, box.registry, box.clock)
        for job in jobs.values():  # pause them: the window stops moving
            service.pause(job.id)
        time.sleep(4)  # the runs in flight end
    esm.drain(idle_polls=2)
    end = start + timedelta(seconds=3)  # the loop ticks about 6 s, then they are paused
    for overlap, job in jobs.items():
        request = event("api-list-jobs.json")
        request["path"] = f"/jobs/{job.id}/fires"
        request["queryStringParameters"] = {"from": start.isoformat(), "to": end.isoformat()}
        request["multiValueQueryStringParameters"] = {k: [v] for k, v in request["queryStringParameters"].items()}
        answer = api_fn.handler(request, LambdaContext())
        assert answer["statusCode"] == 200, answer
        items = json.loads(answer["body"])["items"]
        slots = [i["at"] for i in items if i["trigger"] == "schedule"]
        assert len(slots) == len(set(slots)) == 4, items  # one fate per slot of the window
        statuses = {i["status"] for i in items}
        assert statuses <= {"ran", "skipped", "missed"}, (overlap, items)  # none unaccounted
        reasons = {i["reason"] for i in items if i["status"] != "ran"}
        if overlap == "allow_all":
            assert reasons <= {"collapsed"} and sum(i["status"] == "ran" for i in items) >= 3, items
        elif overlap == "skip":
            assert "overlap_skip" in reasons, items


def test_sample_runner_event_decodes_and_is_handled(deployment: Deployment) -> None:
    sample = event("runner.json")
    assert len(sample["Records"]) >= 2
    for record in sample["Records"]:
        decode_fire(record["body"])
    # the jobs it names are not in this store: each fire is skipped (its job is unknown), none fails
    answer = function_module("runner").handler(sample, LambdaContext())
    assert answer == {"batchItemFailures": []}


def test_api_function_serves_the_job_api_and_refuses_a_timeout_the_runner_cannot_honour(
    deployment: Deployment,
) -> None:
    api_fn = function_module("api")
    created = api_fn.handler(event("api-create-job.json"), LambdaContext())
    assert created["statusCode"] == 201, created
    job = json.loads(created["body"])
    listed = api_fn.handler(event("api-list-jobs.json"), LambdaContext())
    assert listed["statusCode"] == 200
    assert job["id"] in {j["id"] for j in json.loads(listed["body"])["items"]}

    too_long = event("api-create-job.json")
    body = json.loads(too_long["body"])
    too_long["body"] = json.dumps({**body, "name": "too-long", "timeout": 91})  # 120 s runner - 30 s margin
    refused = api_fn.handler(too_long, LambdaContext())
    assert refused["statusCode"] == 422
    message = json.loads(refused["body"])["message"]
    assert "at most 90 seconds" in message and "Lambda runner times out after 120 s" in message
    assert aws.container().store.find_job_by_name("too-long") is None


def runner_logging() -> tuple[Any, aws.Container, io.StringIO]:
    """The runner function's module, its container, and what its log handler writes from now on."""
    runner_fn = function_module("runner")
    box = aws.container()
    out = io.StringIO()
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(out)
    return runner_fn, box, out


def test_runner_logs_are_json_with_the_job_the_fire_and_the_execution(deployment: Deployment, tmp_path: Path) -> None:
    runner_fn, box, out = runner_logging()
    job = box.store.add_job(make_job("logged", handler="test.record", next_run_at=box.clock.now()))
    assert tick_once(box, deployment) == 1
    esm = EventSourceMapping(deployment.sqs, deployment.queue_url, runner_fn.handler)
    esm.drain(idle_polls=2)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    [execution] = box.store.list_executions(job.id)
    about = [line for line in lines if line.get("logger", "").startswith("ticklock.lifecycle")]
    assert {line["message"] for line in about} >= {"execution.started", "execution.finished"}
    for line in about:
        assert line["job_id"] == job.id
        assert line["fire_time"] == execution.scheduled_at.isoformat()
        assert line["execution_id"] == execution.id
        assert line["service"] == "ticklock" and line["level"] in ("INFO", "WARNING")


def test_with_fire_log_summary_an_invocation_ends_with_one_line_counting_its_fires(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TICKLOCK_FIRE_LOG=summary on the runner: no line per fire that ran well, and the invocation's
    fires counted in one fires.summary line before it returns."""
    monkeypatch.setenv("TICKLOCK_FIRE_LOG", "summary")
    aws.container.cache_clear()
    runner_fn, box, out = runner_logging()
    for i in range(3):
        box.store.add_job(make_job(f"counted-{i}", handler="noop", next_run_at=box.clock.now()))
    assert tick_once(box, deployment) == 3
    EventSourceMapping(deployment.sqs, deployment.queue_url, runner_fn.handler).drain(idle_polls=2)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    about = [line["message"] for line in lines if line.get("logger", "").startswith("ticklock.lifecycle")]
    assert "execution.started" not in about and "execution.finished" not in about
    summaries = [line for line in lines if line.get("message") == "fires.summary"]
    assert sum(line["started"] for line in summaries) == 3
    assert sum(line["finished"].get("success", 0) for line in summaries) == 3
    assert all(line["handlers"] == {"noop": line["started"]} for line in summaries)


# -- at least once, crashes, poison ---------------------------------------------------------------------------
@pytest.mark.parametrize("overlap", ["skip", "cancel_other", "allow_all"])
def test_a_duplicate_delivery_never_runs_a_fire_twice(deployment: Deployment, tmp_path: Path, overlap: str) -> None:
    box = box_for(deployment)
    calls = tmp_path / "calls"
    for i in range(5):
        job = make_job(f"dup-{i}", handler="test.record", payload={"path": str(calls)}, next_run_at=box.clock.now())
        box.store.add_job(job.with_changes(policy=Policy(overlap=Overlap(overlap))))
    assert tick_once(box, deployment) == 5
    esm = EventSourceMapping(deployment.sqs, deployment.queue_url, lambda e, c: aws.run_batch(e, c, box))
    messages = esm.receive()
    while len(messages) < 5:
        messages += esm.receive(wait=1)
    # SQS delivers the same message twice (at least once): to two runners at the same time, and again later
    results: list[list[str]] = []
    both = [threading.Thread(target=lambda: results.append(esm.deliver(messages))) for _ in range(2)]
    for thread in both:
        thread.start()
    for thread in both:
        thread.join()
    assert results == [[], []]
    esm.deliver(messages)
    assert set(starts(calls).values()) == {1} and len(starts(calls)) == 5
    box.close()


def test_a_fire_whose_runner_died_before_it_started_runs_once_when_the_message_returns(
    deployment: Deployment, tmp_path: Path
) -> None:
    box = box_for(deployment)
    calls = tmp_path / "calls"
    job = box.store.add_job(
        make_job("unstarted", handler="test.record", payload={"path": str(calls)}, next_run_at=box.clock.now())
    )
    assert tick_once(box, deployment) == 1
    esm = EventSourceMapping(deployment.sqs, deployment.queue_url, lambda e, c: aws.run_batch(e, c, box))
    taken = esm.receive(wait=1)
    assert len(taken) == 1  # ... and the invocation died: nothing recorded, nothing deleted
    assert box.store.list_executions(job.id) == []
    esm.drain(idle_polls=3)  # the message is visible again after the 1 s visibility timeout
    [execution] = box.store.list_executions(job.id)
    assert execution.status is ExecutionStatus.SUCCESS
    assert sum(starts(calls).values()) == 1
    box.close()


def test_a_fire_whose_runner_died_mid_run_is_recorded_as_lost_and_not_run_again(
    deployment: Deployment, tmp_path: Path
) -> None:
    clock = FakeClock(SystemClock().now())
    box = box_for(deployment, clock=clock)
    calls = tmp_path / "calls"
    job = box.store.add_job(
        make_job("crashed", handler="test.record", payload={"path": str(calls)}, timeout=10, next_run_at=clock.now())
    )
    assert tick_once(box, deployment) == 1
    esm = EventSourceMapping(deployment.sqs, deployment.queue_url, lambda e, c: aws.run_batch(e, c, box))
    [taken] = esm.receive(wait=1)
    fire = decode_fire(taken["Body"])
    # the runner recorded the start, then its invocation died (Lambda timeout, out of memory) mid-run
    box.store.start_execution(
        Execution(
            id=uuid.uuid4().hex,
            job_id=job.id,
            fire_key=fire.key,
            handler=job.handler,
            trigger=fire.trigger,
            scheduled_at=fire.scheduled_at,
            started_at=clock.now(),
            deadline_at=clock.now() + timedelta(seconds=job.timeout),
            run_token=run_token(fire.lease_token),  # as the runner writes it: under the fire's claim
            owner="dead-runner",
        )
    )
    # the claim runs out (no heartbeat keeps it), the tick claims the job again, and the old message returns too
    assert fire.job.lease is not None
    clock.advance((fire.job.lease.until - clock.now()).total_seconds() + 1)
    assert tick_once(box, deployment) == 1
    esm.drain(idle_polls=3)
    [execution] = box.store.list_executions(job.id)
    assert execution.status is ExecutionStatus.LOST
    assert execution.error is not None and "left running by dead-runner" in execution.error
    assert not calls.exists()  # a run that may have done its work is never started again on Lambda
    after = box.store.get_job(job.id)
    assert after.next_run_at is not None and after.next_run_at > fire.scheduled_at and after.lease is None
    assert deployment.dead_letters() == []
    box.close()


def test_a_poison_message_is_dead_lettered_after_three_receives_with_its_execution_recorded(
    deployment: Deployment, tmp_path: Path
) -> None:
    box = box_for(deployment)
    calls = tmp_path / "calls"
    good = box.store.add_job(
        make_job("good", handler="test.record", payload={"path": str(calls)}, next_run_at=box.clock.now())
    )
    poison = box.store.add_job(
        make_job("poison", handler="test.record", payload={"path": str(calls)}, next_run_at=box.clock.now())
    )
    real_acquire = box.locker.acquire

    def acquire(key: str, ttl: float) -> str | None:
        if key == f"job:{poison.id}":
            raise RuntimeError("a bug that fails this fire every time")
        return real_acquire(key, ttl)

    box.locker.acquire = acquire  # type: ignore[method-assign]
    assert tick_once(box, deployment) == 2
    deployment.sqs.send_message(QueueUrl=deployment.queue_url, MessageBody="not a fire")
    esm = EventSourceMapping(deployment.sqs, deployment.queue_url, lambda e, c: aws.run_batch(e, c, box))
    esm.drain(idle_polls=3)

    dead = deployment.dead_letters()
    assert sorted(dead, key=len)[0] == "not a fire"
    assert [decode_fire(body).job.id for body in dead if body != "not a fire"] == [poison.id]
    assert esm.failures == 6  # each of the two, three times
    [lost] = box.store.list_executions(poison.id)
    assert lost.status is ExecutionStatus.LOST
    assert lost.error is not None and "dead-lettered after 3 deliveries" in lost.error
    assert "a bug that fails this fire every time" in lost.error
    assert box.store.get_job(poison.id).next_run_at != poison.next_run_at  # advanced: the job goes on
    [ok] = box.store.list_executions(good.id)
    assert ok.status is ExecutionStatus.SUCCESS
    assert sum(starts(calls).values()) == 1
    box.close()
