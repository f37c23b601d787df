"""Three `ticklock serve` replicas sharing one MongoDB (FerretDB) and one Redis."""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from tests.e2e.conftest import Serve, wait_for
from tests.support import servers
from ticklock.domain.schedules import CronSchedule

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def shared(ferretdb_pg_uri: str, redis_url: str) -> Iterator[dict[str, str]]:
    database = f"replicas{uuid.uuid4().hex[:8]}"
    yield {
        "TICKLOCK_STORE": f"{ferretdb_pg_uri.rstrip('/')}/{database}",
        "TICKLOCK_LOCK": redis_url,
        "TICKLOCK_LOG_LEVEL": "warning",
    }
    # bounded: this runs before the ``start`` fixture kills replicas a failed test left running, and a
    # wedged server must fail the test that met it, not hang the suite
    client: MongoClient[dict[str, Any]] = MongoClient(ferretdb_pg_uri, serverSelectionTimeoutMS=5000,
                                                      socketTimeoutMS=30000)  # fmt: skip
    try:
        client.drop_database(database)
    finally:
        client.close()


def executions(uri: str) -> list[dict[str, Any]]:
    client: MongoClient[dict[str, Any]] = MongoClient(uri, tz_aware=True)
    try:
        return list(client.get_default_database()["executions"].find())
    finally:
        client.close()


def starts(calls: Path) -> Counter[tuple[str, str]]:
    lines = calls.read_text().splitlines() if calls.exists() else []
    return Counter((c["job_id"], c["scheduled_at"]) for c in map(json.loads, lines))


def replicas(start: Callable[..., Serve], tmp_path: Path, env: dict[str, str], n: int = 3) -> list[Serve]:
    return [start(tmp_path / f"unused-{i}.db", TICKLOCK_OWNER=f"replica-{i}", **env) for i in range(n)]


def test_three_replicas_run_every_fire_exactly_once(
    start: Callable[..., Serve], tmp_path: Path, shared: dict[str, str]
) -> None:
    calls = tmp_path / "calls"
    nodes = replicas(start, tmp_path, shared)
    cron = CronSchedule("* * * * * *")
    for i in range(300):
        nodes[i % 3].create(
            name=f"job-{i}",
            handler="test.record",
            schedule={"kind": "cron", "expr": cron.expr},
            payload={"path": str(calls)},
        )
    time.sleep(30)
    assert [node.terminate() for node in nodes] == [0, 0, 0]  # each one stopped, whichever did not

    rows = executions(shared["TICKLOCK_STORE"])
    assert rows, "nothing ran"
    assert max(Counter(r["fire_key"] for r in rows).values()) == 1
    assert {r["status"] for r in rows} == {"success"}
    handler_starts = starts(calls)
    assert max(handler_starts.values()) == 1
    assert sum(handler_starts.values()) == len(rows)
    assert {r["owner"] for r in rows} == {"replica-0", "replica-1", "replica-2"}
    # no fire missing: each job's next fire is the one the schedule gives after the previous run ended
    by_job: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_job.setdefault(r["job_id"], []).append(r)
    assert len(by_job) == 300
    # how many ran is the machine's business (FerretDB on 2 cores tops out near 200 fires/s, see README);
    # that every job kept running, and that no fire the schedule owed went missing, is ticklock's
    assert min(len(fires) for fires in by_job.values()) >= 3
    for fires in by_job.values():
        fires.sort(key=lambda r: r["scheduled_at"])
        for prev, nxt in pairwise(fires):
            assert nxt["scheduled_at"] == cron.next_after(max(prev["finished_at"], prev["scheduled_at"]))


def test_fires_held_by_a_killed_replica_run_again_and_nothing_else_twice(
    start: Callable[..., Serve], tmp_path: Path, shared: dict[str, str]
) -> None:
    calls = tmp_path / "calls"
    env = {**shared, "TICKLOCK_LEASE_SLACK": "7"}
    nodes = replicas(start, tmp_path, env)
    for i in range(60):
        nodes[i % 3].create(
            name=f"slow-{i}",
            handler="test.wait",
            timeout=4,
            schedule={"kind": "cron", "expr": "*/10 * * * * *"},
            payload={"seconds": 2, "path": str(calls)},
        )
    # kill a replica while it is inside handlers: whichever owns a run that has started
    running = wait_for(
        lambda: [r for r in executions(shared["TICKLOCK_STORE"]) if r["status"] == "running"], timeout=30, every=0.05
    )
    victim_name = running[0]["owner"]
    victim = nodes[int(victim_name.rsplit("-", 1)[1])]
    survivors = [n for n in nodes if n is not victim]
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(10)
    cut = {
        r["_id"] for r in executions(shared["TICKLOCK_STORE"]) if r["owner"] == victim_name and r["status"] == "running"
    }
    assert cut
    # lease (claim horizon + 4 s timeout + 7 s slack) and lock (4 + 5 s) run out; a survivor resumes each one
    wait_for(
        lambda: all(r["status"] == "success" for r in executions(shared["TICKLOCK_STORE"]) if r["_id"] in cut),
        timeout=60,
        every=0.5,
    )
    for node in survivors:
        assert node.proc.poll() is None
        assert node.terminate() == 0

    rows = {r["_id"]: r for r in executions(shared["TICKLOCK_STORE"])}
    handler_starts = starts(calls)
    for row in rows.values():
        key = (row["job_id"], row["scheduled_at"].astimezone(UTC).isoformat())
        if row["_id"] in cut:
            assert row["resumes"] == 1
            assert row["owner"] != victim_name
            # resumed once; the killed replica may or may not have reached the handler before it died
            assert handler_starts[key] in (1, 2)
        elif row["status"] == "success":
            assert handler_starts[key] == 1  # nothing else ran twice


def test_a_redis_outage_skips_runs_by_policy_and_they_resume_by_themselves(
    start: Callable[..., Serve], tmp_path: Path, ferretdb_pg_uri: str
) -> None:
    ferretdb_uri = ferretdb_pg_uri
    redis, redis_url = servers.start_redis(tmp_path)
    database = f"outage{uuid.uuid4().hex[:8]}"
    env = {
        "TICKLOCK_STORE": f"{ferretdb_uri.rstrip('/')}/{database}",
        "TICKLOCK_LOCK": redis_url,
        "TICKLOCK_LOG_LEVEL": "warning",
    }
    try:
        nodes = replicas(start, tmp_path, env)
        jobs = [
            nodes[i % 3].create(name=f"tick-{i}", handler="noop", schedule={"kind": "cron", "expr": "* * * * * *"})
            for i in range(30)
        ]
        wait_for(lambda: len(executions(env["TICKLOCK_STORE"])) >= 60)
        redis.stop()
        down_at = datetime.now(UTC)
        time.sleep(10)
        skipped = sum(_skips(node) for node in nodes)
        assert skipped > 0
        during = [
            r
            for r in executions(env["TICKLOCK_STORE"])
            if down_at + timedelta(seconds=1) < r["started_at"] < down_at + timedelta(seconds=9)
        ]
        assert during == []
        redis.start()
        back_at = datetime.now(UTC)
        wait_for(
            lambda: (
                {
                    r["job_id"]
                    for r in executions(env["TICKLOCK_STORE"])
                    if r["started_at"] > back_at + timedelta(seconds=1)
                }
                == {j["id"] for j in jobs}
            ),
            timeout=30,
        )
        for node in nodes:
            assert node.proc.poll() is None  # nothing crashed
            assert node.terminate() == 0
    finally:
        redis.stop()
        client: MongoClient[dict[str, Any]] = MongoClient(ferretdb_uri)
        client.drop_database(database)
        client.close()


def _skips(node: Serve) -> float:
    total = 0.0
    for line in node.client.get("/metrics").text.splitlines():
        if line.startswith("ticklock_skips_total") and 'reason="lock_unavailable"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_every_overlap_policy_across_three_replicas_and_a_kill_leaves_one_record_per_fire(
    start: Callable[..., Serve], tmp_path: Path, shared: dict[str, str]
) -> None:
    """Jobs of every overlap policy, fired every second with runs of 1.5 s (so every policy has overlaps to
    decide), on three replicas, one killed with SIGKILL midway. Afterwards each fire has at most one
    execution and each handler start one fire; and, in the ledger, no slot is both run and recorded as not
    run, and no two entries cover one slot: one record per fire."""
    calls = tmp_path / "calls"
    env = {**shared, "TICKLOCK_LEASE_SLACK": "7"}
    nodes = replicas(start, tmp_path, env)
    policies = ["skip", "buffer_one", "buffer_all", "cancel_other", "allow_all"]
    jobs = [
        nodes[i % 3].create(
            name=f"{policy}-{i}",
            handler="test.wait",
            timeout=4,
            schedule={"kind": "cron", "expr": "* * * * * *"},
            payload={"seconds": 1.5, "path": str(calls)},
            policy={"overlap": policy},
        )
        for i, policy in enumerate(policies * 4)
    ]
    began = datetime.now(UTC)
    time.sleep(8)
    nodes[0].proc.send_signal(signal.SIGKILL)
    nodes[0].proc.wait(10)
    time.sleep(12)
    ended = datetime.now(UTC)
    survivor = nodes[1]
    for job in jobs:  # pause them all, so that what the window holds stops moving
        assert survivor.client.post(f"/jobs/{job['id']}/pause").status_code == 200
    time.sleep(6)  # the runs in flight end (4 s timeout)

    rows = executions(shared["TICKLOCK_STORE"])
    assert max(Counter(r["fire_key"] for r in rows).values()) == 1
    handler_starts = starts(calls)
    resumed = {(r["job_id"], r["scheduled_at"].astimezone(UTC).isoformat()) for r in rows if r["resumes"]}
    assert all(count == 1 or key in resumed for key, count in handler_starts.items())
    by_policy: Counter[str] = Counter()
    for job in jobs:
        params: dict[str, str | int] = {"from": began.isoformat(), "to": ended.isoformat(), "limit": 1000}
        answer = survivor.client.get(f"/jobs/{job['id']}/fires", params=params)
        assert answer.status_code == 200, answer.text
        items = answer.json()["items"]
        slots = [i["at"] for i in items if i["trigger"] == "schedule"]
        assert len(slots) == len(set(slots)), items  # one fate per slot
        entries = survivor.client.get("/fires", params={**params, "status": "skipped"}).json()["items"]
        entries += survivor.client.get("/fires", params={**params, "status": "missed"}).json()["items"]
        mine = sorted((e for e in entries if e["job_id"] == job["id"]), key=lambda e: e["first_at"])
        for a, b in pairwise(mine):
            assert a["last_at"] < b["first_at"], (a, b)  # no slot in two entries
        ran = {r["scheduled_at"].astimezone(UTC) for r in rows if r["job_id"] == job["id"]}
        for e in mine:
            first, last = (datetime.fromisoformat(e[k]) for k in ("first_at", "last_at"))
            assert not [at for at in ran if first <= at <= last], e  # no slot both run and recorded
        policy = job["name"].rsplit("-", 1)[0]
        by_policy[policy] += sum(i["status"] == "ran" for i in items)
        reasons = {i["reason"] for i in items if i["status"] in ("skipped", "missed")}
        if policy in ("buffer_all", "cancel_other", "allow_all"):
            assert "overlap_skip" not in reasons, (policy, items)  # these keep, cancel for, or run beside
        elif policy == "skip":
            assert "overlap_skip" in reasons
    assert all(by_policy[p] > 0 for p in policies), by_policy
    assert by_policy["allow_all"] > 1.5 * by_policy["skip"], by_policy  # runs of 1.5 s each second: all vs half
    for node in nodes[1:]:
        assert node.terminate() == 0
