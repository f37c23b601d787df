"""Missed-run and failure alerts through the engine, on every store, with a fake clock, delivered for real:
to the event bus, to a webhook server and an SMTP server (aiosmtpd) the tests start. Each condition
raises once and clears once, also with three replicas judging at the same moment."""

from __future__ import annotations

import hashlib
import hmac
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.engine import Engine
from tests.support.receivers import Receivers
from tests.support.receivers import receivers as start_receivers
from tests.support.recorders import RecordingPublisher
from ticklock.adapters.email.smtp import SMTPSender
from ticklock.adapters.webhook import HttpWebhook
from ticklock.domain.alerts import Alerts, Destinations
from ticklock.domain.job_settings import AlertRules
from ticklock.domain.jobs import Job
from ticklock.engine.outbox import Outbox
from ticklock.handlers.contract import HandlerContext
from ticklock.ports import Store

SECRET = "alert-key"


@pytest.fixture
def receivers() -> Iterator[Receivers]:
    with start_receivers() as box:
        yield box


OUTBOXES: list[Outbox] = []


@pytest.fixture(autouse=True)
def _closed() -> Iterator[None]:
    yield
    while OUTBOXES:
        OUTBOXES.pop().close()


def alerts_for(engine: Engine, receivers: Receivers, store: Store | None = None, publisher: Any = None) -> Alerts:
    outbox = Outbox(
        HttpWebhook(secret=SECRET), SMTPSender.from_url(f"smtp://127.0.0.1:{receivers.port}", "alerts@ticklock.test")
    )
    alerts = Alerts(
        store=store or engine.store,
        publisher=publisher or engine.publisher,
        clock=engine.clock,
        outbox=outbox,
        defaults=Destinations(webhook=receivers.url, email="ops@example.org"),
    )
    OUTBOXES.append(outbox)
    return alerts


def _with_rules(engine: Engine, job: Job, rules: AlertRules) -> Job:
    current = engine.store.get_job(job.id)
    return engine.store.update_job(current.with_changes(alerts=rules), expected_version=current.version)


def _types(engine: Engine) -> list[str]:
    return [e.detail_type for e in engine.publisher.events if e.detail_type.startswith("job.alert.")]


def test_failures_in_a_row_raise_once_and_a_success_clears_once(engine: Engine, receivers: Receivers) -> None:
    outcome = {"fail": True}

    def sometimes(ctx: HandlerContext) -> None:
        if outcome["fail"]:
            raise RuntimeError("vendor answered 503")

    engine.registry.register("sometimes", sometimes)
    job = _with_rules(engine, engine.add("sometimes"), AlertRules(failures_in_a_row=2))
    alerts = alerts_for(engine, receivers)
    runner = engine.runner(alerts=alerts)
    for _ in range(3):
        runner.run(engine.claim())
        engine.clock.advance(10)
    assert _types(engine) == ["job.alert.raised"]  # the second failure raised it; the third did not again
    raised = engine.store.get_job(job.id).open_alerts["failures_in_a_row"]
    assert "the last 2 runs failed" in raised["detail"] and "vendor answered 503" in raised["detail"]
    outcome["fail"] = False
    runner.run(engine.claim())
    engine.clock.advance(10)
    runner.run(engine.claim())
    assert _types(engine) == ["job.alert.raised", "job.alert.cleared"]
    assert engine.store.get_job(job.id).open_alerts == {}
    receivers.wait(posts=2, mails=2)
    [up, down] = receivers.documents()
    assert (up["type"], down["type"]) == ("job.alert.raised", "job.alert.cleared")
    assert up["job_id"] == job.id and up["condition"] == "failures_in_a_row" and down["cleared_at"]
    headers, body = receivers.posts[0]
    expected = hmac.new(SECRET.encode(), headers["x-ticklock-timestamp"].encode() + b"." + body, hashlib.sha256)
    assert headers["x-ticklock-signature"].endswith(expected.hexdigest())
    assert [m["To"] for m in receivers.mails] == ["ops@example.org"] * 2
    assert "failures_in_a_row raised" in receivers.mails[0]["Subject"]
    assert "cleared" in receivers.mails[1]["Subject"]


def test_no_success_for_is_a_dead_mans_switch_judged_with_nothing_running(engine: Engine, receivers: Receivers) -> None:
    job = _with_rules(engine, engine.add(), AlertRules(no_success_for=30, email="owner@example.org"))
    alerts = alerts_for(engine, receivers)
    assert alerts.check() == 1  # a minute old, and no run succeeded in the last 30 s: raised
    assert engine.store.get_job(job.id).open_alerts.keys() == {"no_success"}
    assert alerts.check() == 0  # raised once
    engine.runner(alerts=alerts).run(engine.claim())  # it runs and succeeds: cleared
    assert engine.store.get_job(job.id).open_alerts == {}
    assert _types(engine) == ["job.alert.raised", "job.alert.cleared"]
    receivers.wait(posts=2, mails=2)
    assert [m["To"] for m in receivers.mails] == ["owner@example.org"] * 2  # the job's own address


def test_late_after_raises_for_a_fire_that_has_not_started_and_its_start_clears_it(
    engine: Engine, receivers: Receivers
) -> None:
    job = _with_rules(engine, engine.add(), AlertRules(late_after=10))
    alerts = alerts_for(engine, receivers)
    engine.clock.advance(5)
    assert alerts.check() == 0  # 5 s late: within 10
    engine.clock.advance(10)  # 15 s late
    assert alerts.check() == 1 and alerts.check() == 0
    assert "has not started after 10 s" in engine.store.get_job(job.id).open_alerts["late"]["detail"]
    engine.runner(alerts=alerts).run(engine.claim())
    assert engine.store.get_job(job.id).open_alerts == {}
    assert _types(engine) == ["job.alert.raised", "job.alert.cleared"]
    receivers.wait(posts=2, mails=2)


def test_a_paused_job_is_neither_late_nor_failing(engine: Engine, receivers: Receivers) -> None:
    job = _with_rules(engine, engine.add(), AlertRules(late_after=5, no_success_for=5))
    alerts = alerts_for(engine, receivers)
    engine.clock.advance(30)
    assert alerts.check() == 2
    current = engine.store.get_job(job.id)
    engine.store.update_job(current.with_changes(enabled=False), expected_version=current.version)
    assert alerts.check() == 2 and engine.store.get_job(job.id).open_alerts == {}
    receivers.wait(posts=4, mails=4)


def test_three_replicas_judging_at_once_raise_each_alert_once(
    engine: Engine, receivers: Receivers, open_store: Callable[[], Store]
) -> None:
    jobs = [_with_rules(engine, engine.add(), AlertRules(late_after=5)) for _ in range(20)]
    engine.clock.advance(30)
    publishers = [RecordingPublisher() for _ in range(3)]
    replicas = [alerts_for(engine, receivers, open_store(), publishers[i]) for i in range(3)]
    start = threading.Barrier(3)
    counts: list[int] = []

    def judge(alerts: Alerts) -> None:
        start.wait()
        counts.append(alerts.check())

    threads = [threading.Thread(target=judge, args=(a,)) for a in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sum(counts) == len(jobs)
    raised = [e.detail()["job_id"] for p in publishers for e in p.events if e.detail_type == "job.alert.raised"]
    assert sorted(raised) == sorted(j.id for j in jobs)  # each once, by whichever replica won
    receivers.wait(posts=len(jobs), mails=len(jobs))
    assert all(set(engine.store.get_job(j.id).open_alerts) == {"late"} for j in jobs)


def test_a_delivery_that_fails_is_tried_again_then_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    from ticklock.engine import outbox as module

    monkeypatch.setattr(module, "RETRY_WAITS", (0.01, 0.01, 0.01))
    calls: list[dict[str, Any]] = []

    class Receiver:
        failures = 2

        async def post(self, url: str, document: Any) -> None:
            calls.append(dict(document))
            if self.failures:
                self.failures -= 1
                raise RuntimeError("receiver down")

    receiver = Receiver()
    outbox = Outbox(receiver, None)
    outbox.post("http://x.test/hook", {"a": 1})
    assert outbox.flush(5) and calls == [{"a": 1}] * 3  # two failures, then taken
    receiver.failures = 100
    outbox.post("http://x.test/hook", {"a": 2})
    assert outbox.flush(5) and calls[3:] == [{"a": 2}] * 4  # the first try and three more, then given up
    outbox.close()


def test_one_destinations_deliveries_keep_their_order_through_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    from ticklock.engine import outbox as module

    monkeypatch.setattr(module, "RETRY_WAITS", (0.05, 0.05))
    got: list[tuple[str, Any]] = []

    class Receiver:
        failures = 1

        async def post(self, url: str, document: Any) -> None:
            if document["n"] == 1 and self.failures:  # the first fails once: the second must wait for it
                self.failures -= 1
                raise RuntimeError("receiver down")
            got.append((url, document["n"]))

    outbox = Outbox(Receiver(), None)
    outbox.post("http://a.test/hook", {"n": 1})
    outbox.post("http://a.test/hook", {"n": 2})
    assert outbox.flush(5)
    assert [n for _, n in got] == [1, 2]
    outbox.close()
