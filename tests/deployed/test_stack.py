"""The deployed stack, through its own endpoints: the API behind the emulator's API Gateway (signed as
the CLI signs), the schedule firing the tick function, fires crossing SQS to the runner function through
the event source mapping, executions in the store one per fire, events on the bus reaching a rule's
target, and a duplicate fire message absorbed."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from botocore.config import Config
from botocore.credentials import Credentials

from tests.deployed.conftest import PARAMETERS, REGION, Stack
from tests.e2e.conftest import wait_for
from tests.support import servers
from tests.support.factories import make_job
from ticklock.adapters.queue.sqs import decode_fire, encode_fire
from ticklock.adapters.store.mongo import MongoStore
from ticklock.commands.client import ApiClient, ApiError
from ticklock.commands.sigv4 import Signer, SigV4
from ticklock.domain.executions import ExecutionStatus
from ticklock.domain.fires import Fire, Trigger
from ticklock.domain.schedules import OnceSchedule
from ticklock.errors import StoreUnavailable

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]


def api(stack: Stack) -> ApiClient:
    return ApiClient(stack.api, auth=SigV4(Signer(Credentials("test", "test"), REGION)), timeout=30)


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

        def ended() -> list[dict[str, Any]]:
            items = client.call("GET", f"/jobs/{made['id']}/executions")["items"]
            return items if items and all(r["status"] != "running" for r in items) else []

        runs = wait_for(ended, timeout=90, every=0.5)
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
            ran = wait_for(lambda: len(kept.list_executions(job["id"], limit=100)) >= 8 or None, timeout=180, every=0.5)
            assert ran
            client.call("POST", f"/jobs/{job['id']}/pause")

            def settled() -> list[Any]:  # the fires already queued have run, none is open
                time.sleep(2)
                rows = kept.list_executions(job["id"], limit=500)
                return rows if all(r.status.final for r in rows) and queue_depth(stack, queue) == 0 else []

            queue = stack.outputs["FireQueueUrl"]
            runs = wait_for(settled, timeout=120, every=0.5)
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
    wait_for(lambda: len(finished()) >= 2 * len(runs) or None, timeout=60, every=0.5)
    mine = finished()
    assert {e["detail-type"] for e in mine} == {"job.execution.started", "job.execution.succeeded"}
    succeeded = {e["detail"]["execution_id"] for e in mine if e["detail-type"] == "job.execution.succeeded"}
    assert succeeded == {r.id for r in runs}  # one event per run, each run's own


def test_a_duplicate_fire_message_is_absorbed(stack: Stack, ferretdb_uri: str) -> None:
    """A second message for a fire, as SQS's at-least-once delivery brings one: the same job, slot and
    claim (lease token) as the tick's message, sent while that claim holds. The fire runs once; the copy
    meets its execution and is skipped as a duplicate (or as running elsewhere, if both arrive at once)."""
    client = api(stack)
    kept = store(ferretdb_uri)
    try:
        job = client.call("POST", "/jobs", body={"name": "once-only", "handler": "noop", "timeout": 5,
                                                 "schedule": {"kind": "cron", "expr": "*/3 * * * * *"}})  # fmt: skip

        def claimed() -> Any:  # the job as the tick claimed it (claims run up to a second ahead)
            current = kept.get_job(job["id"])
            return current if current.lease is not None else None

        held = wait_for(claimed, timeout=60, every=0.02)
        assert held.lease is not None and held.next_run_at is not None
        copy = Fire(held, held.next_run_at, Trigger.SCHEDULE, held.lease.token)
        stack.client("sqs").send_message(QueueUrl=stack.outputs["FireQueueUrl"], MessageBody=encode_fire(copy))
        fire_time = copy.scheduled_at.isoformat()

        def met() -> list[str]:
            return [line for line in stack.log().splitlines()
                    if '"fire.skipped"' in line and job["id"] in line and fire_time in line]  # fmt: skip

        skipped = wait_for(met, timeout=60, every=0.5)
        assert all(('"reason":"duplicate"' in line) or ('"reason":"running_elsewhere"' in line) for line in skipped), (
            skipped
        )
        client.call("POST", f"/jobs/{job['id']}/pause")
        same = [e for e in kept.list_executions(job["id"], limit=100) if e.scheduled_at == copy.scheduled_at]
    finally:
        kept.close()
        client.close()
    assert len(same) == 1  # the one execution of that fire
    assert queue_depth(stack, stack.outputs["DeadLetterQueueUrl"]) == 0


@contextmanager
def poisoned(ferretdb: tuple[str, str], job_id: str) -> Iterator[None]:
    """Every run of ``job_id`` fails to be recorded, as a store that rejects its write would: a trigger on
    the table in which FerretDB keeps the ``executions`` collection (its JSONB documents, in PostgreSQL)
    aborts the insert of its RUNNING execution. The placeholder the runner writes when it gives a fire up
    (started and deadline at one instant) is let through, so that the give-up can be seen in the store."""
    _, postgres = ferretdb
    tables = servers.psql(
        postgres,
        "SELECT _jsonb->>'table' FROM deployed._ferretdb_database_metadata WHERE _jsonb->>'_id' = 'executions'",
    ).split()
    assert len(tables) == 1, f"FerretDB's table of the executions collection, in its metadata: {tables}"
    [table] = tables
    assert all(c in "0123456789abcdef" for c in job_id) and table.replace("_", "").isalnum()  # safe in the SQL
    doc = "NEW._jsonb"
    servers.psql(
        postgres,
        f"""CREATE FUNCTION deployed.poison_{job_id}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF {doc}->>'job_id' = '{job_id}' AND {doc}->>'status' = 'running'
                 AND ({doc}->'deadline_at') IS DISTINCT FROM ({doc}->'started_at') THEN
                RAISE EXCEPTION 'this job''s executions cannot be written';
              END IF;
              RETURN NEW;
            END $$;
            CREATE TRIGGER poison_{job_id} BEFORE INSERT ON deployed."{table}"
              FOR EACH ROW EXECUTE FUNCTION deployed.poison_{job_id}();""",
    )
    try:
        yield
    finally:
        servers.psql(
            postgres,
            f'DROP TRIGGER IF EXISTS poison_{job_id} ON deployed."{table}"; '
            f"DROP FUNCTION IF EXISTS deployed.poison_{job_id}();",
        )


def test_a_poison_fire_is_dead_lettered_after_max_receive_count_with_its_execution_lost(
    stack: Stack, ferretdb: tuple[str, str]
) -> None:
    """A fire whose execution cannot be written fails in every delivery (the runner reports it in
    ``batchItemFailures``); on delivery ``MaxReceiveCount`` (3) the runner records it LOST and SQS moves
    the message to the dead-letter queue. The queue's visibility timeout (900 s as deployed) is set to
    5 s for the test, so that the three deliveries take seconds, and put back after."""
    client = api(stack)
    kept = store(ferretdb[0])
    sqs = stack.client("sqs")
    fires = stack.outputs["FireQueueUrl"]
    at = datetime.now(UTC) + timedelta(seconds=8)
    try:
        job = client.call("POST", "/jobs", body={"name": "poison", "handler": "noop", "timeout": 20,
                                                 "schedule": {"kind": "once", "at": at.isoformat()}})  # fmt: skip
        sqs.set_queue_attributes(QueueUrl=fires, Attributes={"VisibilityTimeout": "5"})
        with poisoned(ferretdb, job["id"]):

            def dead_lettered() -> dict[str, Any] | None:
                dlq = stack.outputs["DeadLetterQueueUrl"]
                answer = sqs.receive_message(
                    QueueUrl=dlq, WaitTimeSeconds=1, MaxNumberOfMessages=10, AttributeNames=["All"]
                )
                got = answer.get("Messages", [])
                return next((m for m in got if job["id"] in m["Body"]), None)

            message = wait_for(dead_lettered, timeout=120, every=0.5)
        executions = kept.list_executions(job["id"], limit=10)
        seen = client.call("GET", f"/jobs/{job['id']}")
    finally:
        sqs.set_queue_attributes(QueueUrl=fires, Attributes={"VisibilityTimeout": PARAMETERS["QueueVisibilityTimeout"]})
        kept.close()
        client.close()
    assert decode_fire(message["Body"]).job.id == job["id"]
    assert int(message["Attributes"]["ApproximateReceiveCount"]) >= 3

    def failures() -> list[str] | None:  # one per delivery, the third gave it up (the log may lag a little)
        lines = [line for line in stack.log().splitlines() if '"fire.failed"' in line and job["id"] in line]
        return lines if len(lines) >= 3 else None

    assert wait_for(failures, timeout=30, every=0.5)
    [lost] = executions
    assert lost.status is ExecutionStatus.LOST
    assert lost.error is not None and "dead-lettered after 3 deliveries" in lost.error
    assert "cannot be written" in lost.error
    assert seen["enabled"] is False  # a once job goes on (ends) after its one fire, lost or not


class SlowServer(ThreadingHTTPServer):
    """Answers every GET after ``delay`` seconds, and counts the requests it holds at once."""

    daemon_threads = True
    request_queue_size = 512  # hundreds of checks connect at once

    def __init__(self, delay: float) -> None:
        self.delay, self.open, self.most = delay, 0, 0
        self.mutex = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # the http.server API names it
                with server.mutex:
                    server.open += 1
                    server.most = max(server.most, server.open)
                time.sleep(server.delay)
                with server.mutex:
                    server.open -= 1
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)


def warm_runner_environments(stack: Stack, count: int) -> int:
    """Start ``count`` runner environments before a burst, by as many empty batches invoked at once; returns
    how many invocations succeeded. Thirty environments starting inside the burst, on two shared cores,
    each importing the layer, took the fires past their claims on a slow day (2026-12-03): the fires
    waited on the queue, their leases lapsed (``lease_expired``: released, claimed and sent again) and the
    burst did not end within the wait (with MiniStack also unpacking the layer per environment, before
    tools/ministack/launch.py's change 5: over four minutes). AWS starts environments side by side on
    their own hosts, so that measured the emulator's machine, not the stack: the environments the burst
    uses are started first (thirty in about two minutes that day) and it runs on them. MiniStack reaps an idle
    environment 300 s after its last invocation began (``LAMBDA_WARM_TTL_SECONDS``), long after this."""
    lambdas = stack.client("lambda", Config(read_timeout=600, retries={"max_attempts": 0}, max_pool_connections=count))
    name = stack.outputs["RunnerFunctionName"]

    def invoke() -> bool:
        answer = lambdas.invoke(FunctionName=name, Payload=json.dumps({"Records": []}).encode())
        return answer.get("FunctionError") is None and json.loads(answer["Payload"].read()) == {"batchItemFailures": []}

    with ThreadPoolExecutor(count) as pool:
        return sum(pool.map(lambda _: invoke(), range(count)))


def test_the_runner_runs_at_most_maximum_concurrency_invocations_at_once(stack: Stack, ferretdb_uri: str) -> None:
    """300 fires due at one instant, each an ``http.check`` of a server that answers after 3 s: the event
    source mapping's ``MaximumConcurrency`` (30) bounds the runner environments busy at once, and inside one
    the records of a batch run side by side. Environments are told apart by the executions' owner (each
    Lambda environment's log stream name). Each fire ends in one final execution; on two shared cores,
    thirty environments starting at once can push a check past its timeout, so the outcomes are printed."""
    warmed = warm_runner_environments(stack, 30)
    server = SlowServer(delay=3.0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/slow"
    kept = store(ferretdb_uri)
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=12)
    seen: Counter[str] = Counter()
    timed_out: list[datetime] = []
    try:
        jobs = [make_job(f"slow-{i:03d}", handler="http.check", timeout=20, payload={"url": url},
                         schedule=OnceSchedule(at), next_run_at=at) for i in range(300)]  # fmt: skip
        kept.add_jobs(jobs)
        ours = {job.id for job in jobs}

        def all_ran() -> list[Any] | None:
            # one query for the instant's executions (one per job made each poll a scan of the whole
            # collection per job on FerretDB: 300 every two seconds, beside the runners being measured)
            try:
                found = kept.executions_between(None, start=at, end=at, limit=2000)
            except StoreUnavailable:  # a read that outwaits its timeout while the burst writes: the next poll
                timed_out.append(datetime.now(UTC))
                return None
            runs = [e for e in found if e.job_id in ours]
            seen.clear()
            seen.update(e.status.value for e in runs)
            return runs if len(runs) == len(jobs) and all(e.status.final for e in runs) else None

        try:
            runs = wait_for(all_ran, timeout=300, every=2.0)
        except AssertionError:
            pytest.fail(f"not every fire of {len(jobs)} ended in 300 s (runner environments warmed first: "
                        f"{warmed}); their executions by status: {dict(seen)} ({len(timed_out)} reads timed "
                        f"out), queue holds {queue_depth(stack, stack.outputs['FireQueueUrl'])}")  # fmt: skip
        for job in jobs:
            kept.delete_job(job.id)
    finally:
        kept.close()
        server.shutdown()
        server.server_close()
    assert len({e.job_id for e in runs}) == len(jobs)  # one final execution per fire
    edges = sorted([(e.started_at, 1, e.owner) for e in runs] + [(e.finished_at, -1, e.owner) for e in runs],
                   key=lambda edge: (edge[0], edge[1]))  # fmt: skip
    open_per_owner: Counter[str] = Counter()
    busy = 0
    for _, step, owner in edges:
        open_per_owner[owner] += step
        busy = max(busy, sum(1 for n in open_per_owner.values() if n > 0))
    print(f"\nat most {busy} runner environments at once, {len({e.owner for e in runs})} in all; "
          f"at most {server.most} checks in flight at once; {dict(Counter(e.status.value for e in runs))}")  # fmt: skip
    # the mapping as deployed carries the template's settings; MiniStack bounds an SQS mapping's batches in
    # flight by ScalingConfig.MaximumConcurrency, and by 5 without one (lambda_svc._sqs_esm_concurrency,
    # _ESM_SQS_DEFAULT_CONCURRENCY); an environment runs one batch at a time, and MiniStack counts a batch
    # in flight until its invocation returns, after its executions are finished: so more than 5 environments
    # busy at once shows the template's 30 in force, and at most 30 that it bounds them. (How many of the 30
    # a 2-core machine gets going within a 3 s check varies: 14 at most in earlier runs, 10 on 2026-12-03,
    # when this asserted more than 10, a margin the claim does not need. 300 fires are 30 batches: this load
    # cannot push past 30 even without the cap; it shows it lets more than MiniStack's default run.)
    mappings = stack.client("lambda").list_event_source_mappings(FunctionName=stack.outputs["RunnerFunctionName"])
    (mapping,) = mappings["EventSourceMappings"]
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": 30}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"] and mapping["BatchSize"] == 10
    assert 5 < busy <= 30
    assert server.most > busy  # a batch's records run side by side within an environment


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

    def new_environment() -> None:
        # a change of memory size starts new environments (on AWS too); a description alone would not
        memory = lambdas.get_function_configuration(FunctionName=name)["MemorySize"]
        lambdas.update_function_configuration(FunctionName=name, MemorySize=576 if memory == 512 else 512)

    def names() -> set[str]:
        return {j["name"] for j in client.call("GET", "/jobs", params={"limit": 500})["items"]}

    cfn = stack.client("cloudformation")
    deployed = cfn.describe_stacks(StackName="ticklock")["Stacks"][0]
    # the client closed on every path: a socket left open is reported (ResourceWarning, an error here) in
    # whichever later test the garbage collector happens to run
    with closing(api(stack)) as client:
        try:
            client.call("POST", "/jobs", body={"name": "before-rotation", "handler": "noop", "timeout": 5,
                                               "schedule": {"kind": "interval", "seconds": 3600}})  # fmt: skip
            secrets.put_secret_value(SecretId="ticklock/store-uri", SecretString=f"{ferretdb_uri}rotated")
            new_environment()
            wait_for(lambda: "before-rotation" not in names(), timeout=90, every=0.5)
            assert names() <= {"system:alerts.scan"}  # the other database: only what a cold start seeds
        finally:
            secrets.put_secret_value(SecretId="ticklock/store-uri", SecretString=f"{ferretdb_uri}deployed")
            new_environment()
        wait_for(lambda: "before-rotation" in names(), timeout=90, every=0.5)  # and back, by the same road
    after = cfn.describe_stacks(StackName="ticklock")["Stacks"][0]
    # never updated: no redeploy
    assert (after["StackStatus"], after.get("LastUpdatedTime")) == (
        deployed["StackStatus"],
        deployed.get("LastUpdatedTime"),
    )
