"""The FireQueue adapters under test, each with what runs its fires: the local pool with its work functions
(alone, and taking fires together as ``ticklock serve`` wires it), and an SQS queue on a real MiniStack whose
messages the test receives and decodes, as a runner function does."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Protocol

import pytest

from tests.support import servers
from tests.support.factories import T0, make_job
from tests.support.waiting import wait_until
from ticklock.adapters.queue.sqs import SQSQueue, decode_fire, sqs_client
from ticklock.domain.fires import Fire, Lease, Trigger
from ticklock.engine.pool import WorkerPool
from ticklock.ports import FireQueue

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}
ROOM = 16  # the pool's queue: more than an SQS batch, so that each case runs the same counts on both
WAIT = 30.0  # seconds a test waits for what another thread or the server does, at most (never a measure)


class Subject(Protocol):
    """A FireQueue and the consumer behind it, which the test holds back or lets run."""

    queue: FireQueue
    room: int | None  # fires that wait in the queue while every consumer is busy (None: unbounded)

    def occupy(self) -> list[Fire]:
        """Submit fires until every consumer is busy with one (held until ``release``); returns them."""
        ...

    def release(self) -> None:
        """Let the consumers run what they take, from now on."""
        ...

    def delivered(self, expect: int) -> list[Fire]:
        """``release``, wait until ``expect`` fires reached the consumers, let every consumer finish, and
        return each fire that reached them, as often as it did."""
        ...

    def unreachable(self) -> list[FireQueue]:
        """Queues of this kind that cannot hand anything over."""
        ...

    def close(self) -> None: ...


class PoolSubject:
    """The local pool; what reaches its work functions is delivered. The functions wait for ``release``."""

    def __init__(self, *, together: bool) -> None:
        self.workers = 2
        self.room: int | None = ROOM
        self._gate = threading.Event()
        self._seen: list[Fire] = []
        self._mutex = threading.Lock()
        self._together = together
        self.pool = self._pool()
        self.queue: FireQueue = self.pool

    def _pool(self) -> WorkerPool:
        def run_all(fires: list[Fire]) -> None:
            with self._mutex:
                self._seen += fires
            self._gate.wait(WAIT)

        if self._together:
            return WorkerPool(run_all, workers=self.workers, queue_size=ROOM, together=lambda fire: True)
        return WorkerPool(run_all, workers=self.workers, queue_size=ROOM)

    def _count(self) -> int:
        with self._mutex:
            return len(self._seen)

    def occupy(self) -> list[Fire]:
        held = []
        for i in range(self.workers):  # one at a time, so that each worker takes one (none takes two together)
            fire = make_fire(f"occupier-{i}")
            self.pool.submit(fire)
            held.append(fire)
            assert wait_until(lambda: self._count() == len(held), WAIT), "a worker did not take its fire"
        return held

    def release(self) -> None:
        self._gate.set()

    def delivered(self, expect: int) -> list[Fire]:
        self.release()
        assert wait_until(lambda: self._count() >= expect, WAIT), f"{self._count()} of {expect} fires ran"
        assert self.pool.stop(WAIT), "a worker did not finish"
        with self._mutex:
            return list(self._seen)

    def unreachable(self) -> list[FireQueue]:
        stopped = self._pool()
        assert stopped.stop(WAIT)
        return [stopped]

    def close(self) -> None:
        self.release()
        self.pool.stop(WAIT)


class SQSSubject:
    """An SQS queue of its own on MiniStack; what the test receives from it, decoded, is delivered."""

    room: int | None = None

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.client = sqs_client(endpoint)
        # long enough that a message received here is not delivered again during the test
        attributes = {"VisibilityTimeout": "300"}
        name = f"fires-{uuid.uuid4().hex[:12]}"
        self.url = self.client.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        self.queue: FireQueue = SQSQueue(self.url, client=self.client)

    def occupy(self) -> list[Fire]:
        return []  # the runners' concurrency is not the queue's: nothing to fill

    def release(self) -> None:
        pass  # nothing holds the messages back

    def delivered(self, expect: int) -> list[Fire]:
        got: list[Fire] = []

        def all_in() -> bool:
            got.extend(self._receive())
            return len(got) >= expect

        assert wait_until(all_in, WAIT), f"{len(got)} of {expect} fires were received"
        got += self._receive()  # and one more look: a fire sent twice would be here
        return got

    def _receive(self) -> list[Fire]:
        """What one receive (waiting up to a second for it) gets, decoded; deleted from the queue."""
        answer = self.client.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        messages = answer.get("Messages", [])
        if messages:
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
            self.client.delete_message_batch(QueueUrl=self.url, Entries=entries)
        return [decode_fire(m["Body"]) for m in messages]

    def unreachable(self) -> list[FireQueue]:
        nowhere = f"{self.endpoint}/000000000000/no-such-queue-{uuid.uuid4().hex[:8]}"
        nobody = f"http://127.0.0.1:{servers.free_port()}"  # an endpoint nothing listens on (a stopped one)
        return [SQSQueue(nowhere, client=self.client), SQSQueue(self.url, client=sqs_client(nobody))]

    def close(self) -> None:
        self.client.delete_queue(QueueUrl=self.url)


def make_fire(name: str, i: int = 0) -> Fire:
    """A claimed job's fire, its trigger and lease token its own."""
    token = f"token-{name}-{uuid.uuid4().hex[:8]}"
    job = make_job(name, payload={"i": i}).with_changes(lease=Lease(token, "tick", T0))
    trigger = (Trigger.SCHEDULE, Trigger.MANUAL, Trigger.BACKFILL)[i % 3]
    return Fire(job, T0, trigger, token)


@pytest.fixture(scope="session")
def ministack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """MiniStack, started for this session's queue contract: its endpoint."""
    server, endpoint = servers.start_ministack(tmp_path_factory.mktemp("ministack-queue"))
    yield endpoint
    server.stop()


@pytest.fixture(params=["pool", "pool-together", "sqs"])
def subject(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Subject]:
    made: Subject
    if request.param == "sqs":
        for key, value in CREDENTIALS.items():
            monkeypatch.setenv(key, value)
        made = SQSSubject(request.getfixturevalue("ministack"))
    else:
        made = PoolSubject(together=request.param == "pool-together")
    yield made
    made.close()
