"""`ticklock serve` end to end: a real process, a real SQLite file, real HTTP."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Serve, run_cli, wait_for
from tests.support.receivers import receivers

pytestmark = pytest.mark.e2e


def final(serve: Serve, job_id: str) -> list[dict[str, Any]]:
    return [e for e in serve.executions(job_id) if e["status"] not in ("running", "interrupted")]


def test_jobs_run_with_success_failure_and_timeout_statuses(start: Callable[..., Serve]) -> None:
    serve = start()
    ok = serve.create(name="ok", handler="noop", schedule={"kind": "interval", "seconds": 1})
    failing = serve.create(
        name="failing",
        handler="test.fail",
        schedule={"kind": "interval", "seconds": 3600},
        max_retries=2,
        timeout=30,
        payload={"message": "nope"},
    )
    slow = serve.create(
        name="slow",
        handler="test.sleep",
        schedule={"kind": "interval", "seconds": 3600},
        timeout=0.5,
        payload={"seconds": 3},
    )
    serve.client.post(f"/jobs/{failing['id']}/trigger")
    serve.client.post(f"/jobs/{slow['id']}/trigger")

    runs = wait_for(lambda: len(final(serve, ok["id"])) >= 3 and final(serve, ok["id"]))
    assert {e["status"] for e in runs} == {"success"}
    assert all(e["lag"] >= 0 for e in runs)
    [failed] = wait_for(lambda: final(serve, failing["id"]))
    assert failed["status"] == "failed"
    assert failed["attempts"] == 3
    assert failed["error"] == "RuntimeError: nope"
    assert failed["trigger"] == "manual"
    [timed_out] = wait_for(lambda: final(serve, slow["id"]))
    assert timed_out["status"] == "timeout"
    metrics = serve.client.get("/metrics").text
    assert 'ticklock_executions_total{handler="test.fail",status="failed"} 1.0' in metrics
    assert 'ticklock_executions_total{handler="test.sleep",status="timeout"} 1.0' in metrics
    assert "ticklock_dispatch_lag_seconds_bucket" in metrics
    assert serve.terminate() == 0


def test_handlers_that_hang_past_their_deadline_do_not_take_the_workers(start: Callable[..., Serve]) -> None:
    # Two workers, four fires whose sync handler sleeps far past its deadline (serve runs them on the
    # worker's own thread): each is finished as a timeout at its deadline, the stuck workers are replaced,
    # and a job due every second goes on running meanwhile
    serve = start(TICKLOCK_WORKERS="2")
    hung = [
        serve.create(
            name=f"hangs-{i}",
            handler="test.sleep",
            schedule={"kind": "interval", "seconds": 3600},
            timeout=0.5,
            payload={"seconds": 60},
        )
        for i in range(4)
    ]
    for job in hung:
        serve.client.post(f"/jobs/{job['id']}/trigger")
    for job in hung:
        job_id = job["id"]
        [timed_out] = wait_for(lambda: final(serve, job_id))  # noqa: B023 - called before the loop moves on
        assert timed_out["status"] == "timeout"
    ok = serve.create(name="ok", handler="noop", schedule={"kind": "interval", "seconds": 1})
    runs = wait_for(lambda: len(final(serve, ok["id"])) >= 3 and final(serve, ok["id"]))
    assert {e["status"] for e in runs} == {"success"}
    metrics = serve.client.get("/metrics").text
    assert "ticklock_handler_threads_abandoned 4.0" in metrics
    assert serve.terminate() == 0  # the stuck threads do not hold the shutdown


def test_pause_resume_and_trigger(start: Callable[..., Serve], tmp_path: Path) -> None:
    serve = start()
    job = serve.create(name="every-second", handler="noop", schedule={"kind": "cron", "expr": "* * * * * *"})
    wait_for(lambda: len(serve.executions(job["id"])) >= 2)
    paused = serve.client.post(f"/jobs/{job['id']}/pause").json()
    assert paused["enabled"] is False
    # let anything claimed before the pause finish, then nothing more may run
    wait_for(lambda: not serve.client.get(f"/jobs/{job['id']}").json()["running"])
    settled = len(serve.executions(job["id"]))
    time.sleep(2.5)
    assert len(serve.executions(job["id"])) == settled

    triggered = serve.client.post(f"/jobs/{job['id']}/trigger")
    assert triggered.status_code == 202
    manual = wait_for(lambda: [e for e in serve.executions(job["id"]) if e["trigger"] == "manual"])
    assert len(manual) == 1
    assert manual[0]["status"] in ("running", "success")
    assert serve.client.get(f"/jobs/{job['id']}").json()["enabled"] is False

    resumed = serve.client.post(f"/jobs/{job['id']}/resume").json()
    assert resumed["enabled"] is True
    wait_for(lambda: len(serve.executions(job["id"])) >= settled + 3)
    assert serve.terminate() == 0


def test_sigterm_finishes_cleanly_and_a_cut_off_fire_is_resumed_after_restart(
    start: Callable[..., Serve], tmp_path: Path
) -> None:
    db = tmp_path / "restart.db"
    calls = tmp_path / "calls"
    serve = start(db, TICKLOCK_SHUTDOWN_GRACE="0.5")
    job = serve.create(
        name="long",
        handler="test.wait",
        schedule={"kind": "interval", "seconds": 3600},
        timeout=60,
        payload={"seconds": 4, "path": str(calls)},
    )
    serve.client.post(f"/jobs/{job['id']}/trigger")
    wait_for(lambda: calls.exists() and calls.read_text())
    assert serve.terminate() == 0
    assert "shutdown.done" in serve.log()

    again = start(db, TICKLOCK_SHUTDOWN_GRACE="0.5")
    [execution] = wait_for(lambda: [e for e in again.executions(job["id"]) if e["status"] == "success"], timeout=40)
    assert execution["resumes"] == 1
    assert execution["trigger"] == "manual"
    assert len(calls.read_text().splitlines()) == 2
    assert again.client.get(f"/jobs/{job['id']}").json()["trigger_pending_at"] is None
    assert again.terminate() == 0


def test_a_duplicate_handler_stops_the_boot(tmp_path: Path) -> None:
    result = run_cli(
        "serve", "--db", str(tmp_path / "x.db"), env={"TICKLOCK_HANDLER_MODULES": "tests.support.duplicate_noop"}
    )
    assert result.returncode == 2
    assert "handler 'noop' is registered twice" in result.stderr


def test_a_bad_setting_stops_the_boot_naming_the_variable(tmp_path: Path) -> None:
    result = run_cli("serve", "--db", str(tmp_path / "x.db"), env={"TICKLOCK_PORT": "eighty"})
    assert result.returncode == 2
    assert "TICKLOCK_PORT" in result.stderr
    result = run_cli("serve", "--db", str(tmp_path / "x.db"), "--workers", "0")
    assert result.returncode == 2
    assert "--workers" in result.stderr


def test_help_lists_the_commands() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    assert "serve" in result.stdout
    serve_help = run_cli("serve", "--help")
    assert "--port" in serve_help.stdout
    assert "--db" in serve_help.stdout
    assert "TICKLOCK_PORT" in serve_help.stdout


def test_a_token_protects_the_api_and_loopback_is_forced_without_one(start: Callable[..., Serve]) -> None:
    open_serve = start(TICKLOCK_HOST="0.0.0.0")
    assert "api.loopback_only" in open_serve.log()
    open_serve.terminate()
    guarded = start(TICKLOCK_API_TOKEN="s3cret")
    assert guarded.client.get("/jobs").status_code == 200
    anonymous = guarded.client.get("/jobs", headers={"Authorization": ""})
    assert anonymous.status_code == 401
    assert guarded.client.get("/health", headers={"Authorization": ""}).status_code == 200
    guarded.terminate()


def test_the_fire_ledger_from_ticklock_serve_accounts_for_slots_a_long_run_overlapped(
    start: Callable[..., Serve],
) -> None:
    serve = start()
    job = serve.create(
        name="overlapping",
        handler="test.sleep",
        schedule={"kind": "cron", "expr": "* * * * * *"},  # every second; each run takes 2.5 s
        payload={"seconds": 2.5},
        timeout=10,
    )

    def accounted() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = serve.client.get(f"/jobs/{job['id']}/fires").json()["items"]
        done = [i for i in items if i["status"] in ("ran", "skipped", "missed")]
        return done if sum(i["status"] == "ran" for i in done) >= 2 and any(i["status"] != "ran" for i in done) else []

    items = wait_for(accounted, timeout=60)
    every: list[dict[str, Any]] = serve.client.get(f"/jobs/{job['id']}/fires").json()["items"]
    slots = [i["at"] for i in every if i["trigger"] == "schedule"]
    assert len(slots) == len(set(slots))  # one fate per slot
    assert not [i for i in every if i["status"] == "unaccounted"], every  # and every slot has one
    reasons = {i["reason"] for i in items if i["status"] != "ran"}
    assert reasons <= {"overlap_skip", "collapsed"} and "overlap_skip" in reasons
    skipped = serve.client.get("/fires", params={"reason": "overlap_skip"}).json()["items"]
    assert skipped and all(e["job_id"] == job["id"] for e in skipped)
    metrics = serve.client.get("/metrics").text
    assert 'ticklock_fires_total{outcome="skipped",reason="overlap_skip"}' in metrics
    assert 'ticklock_fires_total{outcome="ran",reason="success"}' in metrics
    assert serve.terminate() == 0


def test_alerts_from_ticklock_serve_reach_a_webhook_and_smtp_raised_and_cleared_once(
    start: Callable[..., Serve], tmp_path: Path
) -> None:
    """A job that fails every second with failures_in_a_row 2, on ``ticklock serve`` configured with the
    deployment's alert webhook and email (a webhook server and an SMTP server the test starts): one
    raised alert reaches both and GET /alerts; once the job succeeds, one cleared."""
    with receivers() as box:
        serve = start(
            TICKLOCK_ALERTS_WEBHOOK=box.url,
            TICKLOCK_ALERTS_EMAIL="ops@example.org",
            TICKLOCK_EMAIL=f"smtp://127.0.0.1:{box.port}",
        )
        job = serve.create(
            name="failing",
            handler="test.fail",
            schedule={"kind": "cron", "expr": "* * * * * *"},
            alerts={"failures_in_a_row": 2},
        )
        wait_for(lambda: box.posts and box.mails, timeout=30)
        assert [a["condition"] for a in serve.client.get("/alerts").json()["items"]] == ["failures_in_a_row"]
        assert serve.client.patch(f"/jobs/{job['id']}", json={"handler": "test.record"}).status_code == 200
        box.wait(posts=2, mails=2, timeout=30)  # cleared once: more fires run, nothing more is sent
        assert [d["type"] for d in box.documents()] == ["job.alert.raised", "job.alert.cleared"]
        assert box.mails[0]["To"] == "ops@example.org"
        assert serve.client.get("/alerts").json()["items"] == []
        assert serve.terminate() == 0


def test_a_quick_handler_that_hangs_does_not_hold_up_the_other_jobs(
    start: Callable[..., Serve], tmp_path: Path
) -> None:
    # a worker takes the fires of a quick handler queued together and runs them in turn. Jobs of a handler
    # that is quick (it returns at once while the gate file is absent), their fires spread over each second
    # by jitter, run so; then the gate is opened and the next of them sleeps 9 s past nothing (its deadline
    # is 60 s). Jobs of other handlers due every second keep starting on time meanwhile: fires are taken
    # together with their own handler's only.
    serve = start()
    gate = tmp_path / "gate"
    spread = {"max_jitter": 0.9}
    witnesses = [
        serve.create(name=f"witness-{i}", handler="noop", schedule={"kind": "interval", "seconds": 1}, policy=spread)
        for i in range(4)
    ]
    gated = [
        serve.create(
            name=f"gated-{i}",
            handler="test.gated",
            schedule={"kind": "interval", "seconds": 1},
            timeout=60,
            payload={"gate": str(gate), "seconds": 9},
            policy=spread,
        )
        for i in range(8)
    ]

    def quick_runs() -> int:
        return sum(len([e for e in final(serve, job["id"]) if e["status"] == "success"]) for job in gated)

    wait_for(lambda: quick_runs() >= 40, timeout=60)  # the handler counts as quick after 20 quick runs
    gate.touch()
    opened = time.time()
    # 7 s of the held run's 9: a job on time fires twice in it even at the most jitter (a fire every 1.9 s)
    # with more than 2 s to spare
    time.sleep(7)
    gate.unlink()
    lags = {
        witness["name"]: [
            e["lag"]
            for e in serve.executions(witness["id"])
            if datetime.fromisoformat(e["scheduled_at"]).timestamp() > opened
        ]
        for witness in witnesses
    }
    late = {name: each for name, each in lags.items() if len(each) < 2 or max(each) >= 1.0}
    assert not late, f"jobs did not start on time while a quick handler's run hung (lags): {late}"
    # the held-up run ends after its 9 s
    wait_for(lambda: any((e.get("duration") or 0) >= 8.5 for job in gated for e in final(serve, job["id"])), timeout=20)
    for job in [*witnesses, *gated]:
        fired = [e["scheduled_at"] for e in serve.executions(job["id"])]
        assert len(fired) == len(set(fired)), f"a fire of {job['name']} ran twice"
    assert serve.terminate() == 0
