"""The Lambda deployment's data path at its real throughput, emulated end to end without Docker: 1,500
interval jobs every second for 70 s (1,000+ fires/s), tick -> SQS -> runners, on MiniStack's SQS.

``tests/support/lambda_shape.py`` runs it (the parts, each a process of its own, are described there):
one tick loop handing over to the next "minute's" half-way, 30 runner environments fed by pollers that
behave like Lambda's, 5 % of the handled messages sent again and 2 % of the batches delivered to two
environments at once. The store is the embedded SQLite file (FerretDB manages ~190 fires/s on this
machine: README, "Testing against FerretDB"; the function tests run the same code on FerretDB and Redis), the
locks are on Redis.

Asserted: every fire ran exactly once, each job's fires follow its schedule, every job kept firing, the
duplicates and twin deliveries were absorbed, nothing was dead-lettered or failed, no more than 30
invocations ran at once. Throughput, lag and CPU are printed, not asserted (shared machines):
``bench/lambda_shape.py`` prints them as the README's table.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import servers
from tests.support.lambda_shape import Shape, chains_hold, run_shape, summary

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def ministack(tmp_path: Path) -> Iterator[tuple[servers.Server, str]]:
    server, url = servers.start_ministack(tmp_path / "ministack", MS_SERVER="uvicorn")
    yield server, url
    server.stop()


@pytest.mark.timeout(600)
def test_1000_fires_a_second_for_60_s_run_every_fire_exactly_once(
    ministack: tuple[servers.Server, str], redis_server: servers.Server, redis_url: str, tmp_path: Path
) -> None:
    shape = Shape()
    emulator, endpoint = ministack
    pids = {"ministack": emulator.pid, "redis": redis_server.pid}
    result = run_shape(shape, endpoint=endpoint, redis_url=redis_url, workdir=tmp_path, server_pids=pids)
    print(f"\nLambda shape on MiniStack: {summary(result)}")

    assert result.tick_reports["tick-1"]["ran"] and result.tick_reports["tick-1"]["handed_over"]
    assert result.tick_reports["tick-2"]["ran"]
    assert result.errors == 0 and result.undeleted == 0, "the harness dropped a delivery or a delete"
    assert result.drained, "the queue still held fires when the runners stopped"
    assert set(result.fires.values()) == {1}, "a fire ran more than once"
    # and none was lost: every execution the store holds is a handler start, and every one ended well
    assert set(result.executions) == set(result.fires) and set(result.executions.values()) == {1}
    assert set(result.statuses) == {"success"}, result.statuses
    assert len(result.per_job) == shape.jobs
    assert chains_hold(result), "a job fired again less than its interval after a run"
    # every job kept firing (how often depends on the machine)
    assert min(len(times) for times in result.per_job.values()) >= 10
    assert result.duplicates_sent > 0 and result.twins > 0
    assert result.records_failed == 0 and result.dead_lettered == 0
    # the harness's own bound (its environments); the deployed stack's test checks the real mapping's
    assert 1 < result.most_in_flight <= shape.concurrency
