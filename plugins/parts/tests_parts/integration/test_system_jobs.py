"""The product's system jobs: seeded at boot by name, once, from any number of processes at once, keeping an operator's
later changes; and the alert scan running from `ticklock serve` and from the runner function."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.lambda_sqs import LambdaContext
from tests_parts.support.vendor import VendorServer, vendor_server
from ticklock.adapters.queue.sqs import encode_fire
from ticklock.clock import SystemClock
from ticklock.domain.fires import Fire
from ticklock.domain.schedules import IntervalSchedule
from ticklock.domain.service import JobService
from ticklock.errors import ConfigError
from ticklock.handlers.contract import Registry
from ticklock.ports import Store
from ticklock.runtimes.plugins import Plugins, register_all
from ticklock.settings import Settings
from ticklock_parts.adapters.alerts.sqlite import SQLiteAlertStore
from ticklock_parts.adapters.catalogue.sqlite import SQLiteCatalogueStore


def service(store: Store) -> JobService:
    return JobService(store, register_all(Registry()), SystemClock())


def seed(service: JobService, settings: Settings) -> None:
    Plugins(settings).seed(service)


def system_jobs(settings: Settings) -> dict[str, Any]:
    return Plugins(settings).system_jobs()


def test_seeding_twice_leaves_one_job_and_keeps_an_operators_changes(open_store: Callable[[], Store]) -> None:
    store = open_store()
    settings = Settings.load(environ={})
    seed(service(store), settings)
    [job] = store.list_jobs()
    assert (job.name, job.handler, job.timeout, job.max_retries) == ("system:alerts.scan", "alerts.scan", 600.0, 0)
    assert job.schedule == IntervalSchedule(86400)
    # an operator runs it hourly and pauses it; the next boot seeds again
    service(store).update(job.id, {"schedule": IntervalSchedule(3600)})
    service(store).pause(job.id)
    seed(service(store), Settings.load(environ={"TICKLOCK_PARTS_ALERTS_EVERY": "600"}))
    [after] = store.list_jobs()
    assert after.id == job.id and after.schedule == IntervalSchedule(3600) and not after.enabled


def test_three_processes_seeding_at_once_leave_one_job(open_store: Callable[[], Store]) -> None:
    stores = [open_store() for _ in range(3)]  # a client each, as three replicas have
    settings = Settings.load(environ={})
    go = threading.Barrier(3)
    errors: list[BaseException] = []

    def boot(store: Store) -> None:
        go.wait()
        try:
            seed(service(store), settings)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    replicas = [threading.Thread(target=boot, args=(s,)) for s in stores]
    for thread in replicas:
        thread.start()
    for thread in replicas:
        thread.join()
    assert errors == []
    assert [j.name for j in stores[0].list_jobs()] == ["system:alerts.scan"]


def test_no_system_jobs_when_none_are_asked_for_and_a_clear_error_for_an_unknown_one(
    open_store: Callable[[], Store],
) -> None:
    store = open_store()
    seed(service(store), Settings.load(environ={"TICKLOCK_SYSTEM_JOBS": ""}))
    assert store.list_jobs() == []
    message = "TICKLOCK_SYSTEM_JOBS: no system job 'reports.weekly'; known: alerts.scan, catalogue.spot_prices"
    with pytest.raises(ConfigError, match=re.escape(message)):
        seed(service(store), Settings.load(environ={"TICKLOCK_SYSTEM_JOBS": "reports.weekly"}))


def alerts_fixture(db: Path) -> None:
    data = SQLiteAlertStore(db)
    data.put_parts([{"_id": "p1", "riskScore": 90, "lifecycle": "EOL"}])
    data.put_alerts(
        [
            {
                "_id": "a1",
                "userId": "u1",
                "partId": "p1",
                "rules": [
                    {"id": "risk", "type": "risk", "operator": "gt", "threshold": "70"},
                    {"id": "eol", "type": "lifecycle", "operator": "gte", "threshold": "eol"},
                ],
            }
        ]
    )
    data.close()


def run_on_lambda(box: Any, name: str) -> Any:
    """Claim the seeded job ``name`` now and run its fire through the runner function's batch handling."""
    from ticklock.runtimes import aws

    [job] = [j for j in box.store.list_jobs() if j.name == name]
    now = box.clock.now()
    box.store.update_job(job.with_changes(next_run_at=now), expected_version=job.version)
    [claimed] = box.store.claim_due(now=now, horizon=now, limit=10, owner="tick", slack=timedelta(seconds=60))
    record = {
        "messageId": "m1",
        "receiptHandle": "r1",
        "body": encode_fire(Fire.of(claimed)),
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:fires",
        "awsRegion": "us-east-1",
    }
    assert aws.run_batch({"Records": [record]}, LambdaContext(timeout=900), box) == {"batchItemFailures": []}
    [execution] = box.store.list_executions(job.id)
    assert execution.status.value == "success", execution.error
    return job


def test_the_runner_function_runs_the_seeded_system_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ticklock.runtimes import aws

    db = tmp_path / "lambda.db"
    alerts_fixture(db)
    catalogue = SQLiteCatalogueStore(db)
    catalogue.put_parts([{"_id": f"q{i}", "mpn": f"MPN-{i}"} for i in range(3)])
    catalogue.close()
    with vendor_server() as vendor:
        for key, value in {
            "TICKLOCK_DB": str(db),
            "TICKLOCK_RUNNER_TIMEOUT": "900",
            "TICKLOCK_MAX_RESUMES": "0",
            "TICKLOCK_PARTS_VENDOR_URL": vendor.url,
            "TICKLOCK_PARTS_VENDOR_KEY": vendor.key,
        }.items():
            monkeypatch.setenv(key, value)
        aws.container.cache_clear()
        try:
            box = aws.container()  # a cold start: seeds the system jobs
            scan = run_on_lambda(box, "system:alerts.scan")
            assert scan.timeout == 600
            run_on_lambda(box, "system:catalogue.spot_prices")
        finally:
            if aws.container.cache_info().currsize:
                aws.container().close()
            aws.container.cache_clear()
        assert vendor.requests == [["MPN-0", "MPN-1", "MPN-2"]]
    data = SQLiteCatalogueStore(db)
    assert len(data.notifications()) == 2
    assert data.parts(["q1"])["q1"]["price"] == VendorServer.price("MPN-1")
    data.close()


def test_the_system_job_table_names_its_handlers() -> None:
    jobs = system_jobs(Settings.load(environ={"TICKLOCK_RUNNER_TIMEOUT": "120"}))
    assert jobs["alerts.scan"].timeout == 90  # what a 120 s Lambda runner allows
    assert json.dumps(sorted(jobs)) == '["alerts.scan"]'  # the walk needs a vendor URL


def test_the_catalogue_walk_is_seeded_once_a_vendor_is_configured(open_store: Callable[[], Store]) -> None:
    store = open_store()
    seed(service(store), Settings.load(environ={}))
    assert [j.name for j in store.list_jobs()] == ["system:alerts.scan"]
    seed(service(store), Settings.load(environ={"TICKLOCK_PARTS_VENDOR_URL": "https://vendor.example/api"}))
    walk = store.find_job_by_name("system:catalogue.spot_prices")
    assert walk is not None and walk.handler == "catalogue.spot_prices"
    assert walk.schedule == IntervalSchedule(3600) and walk.timeout == 900 and walk.max_retries == 0
