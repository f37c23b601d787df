"""The Locker port's contract, run unchanged on every adapter."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from tests.support.servers import free_port, start_redis_tls
from tests.support.waiting import wait_until
from ticklock.adapters.lock.local import LocalLocker
from ticklock.adapters.lock.redis import RedisLocker
from ticklock.clock import FakeClock
from ticklock.errors import LockUnavailable
from ticklock.ports import Locker


@dataclass
class LockerUnderTest:
    locker: Locker
    other: Locker  # another client of the same backend (another process, for a shared backend)
    pass_time: Callable[[float], None]


@pytest.fixture(params=["local", "redis"])
def subject(request: pytest.FixtureRequest) -> Iterator[LockerUnderTest]:
    if request.param == "local":
        clock = FakeClock()
        locker = LocalLocker(clock)
        yield LockerUnderTest(locker, locker, clock.advance)
        return
    url = request.getfixturevalue("redis_url")
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    # two clients with their own connections, as two processes would have; Redis keeps time itself
    clients = [redis.Redis.from_url(url), redis.Redis.from_url(url)]
    yield LockerUnderTest(
        RedisLocker(url, client=clients[0], prefix=prefix),
        RedisLocker(url, client=clients[1], prefix=prefix),
        time.sleep,
    )
    for client in clients:
        client.close()


def test_an_unreachable_backend_raises_lock_unavailable() -> None:
    port = free_port()  # nothing listens there
    client = redis.Redis(port=port, socket_connect_timeout=0.5)
    locker = RedisLocker(f"redis://127.0.0.1:{port}/0", client=client)
    try:
        with pytest.raises(LockUnavailable):
            locker.acquire("job:1", 1)
        with pytest.raises(LockUnavailable):
            locker.release("job:1", "token")
    finally:
        client.close()


def test_acquire_gives_a_token_and_blocks_others(subject: LockerUnderTest) -> None:
    token = subject.locker.acquire("job:1", 10)
    assert token
    assert subject.other.acquire("job:1", 10) is None
    assert subject.other.acquire("job:2", 10)


def test_release_by_the_holder_frees_the_key(subject: LockerUnderTest) -> None:
    token = subject.locker.acquire("job:1", 10)
    assert token
    subject.locker.release("job:1", token)
    assert subject.other.acquire("job:1", 10)


def test_release_by_someone_else_does_nothing(subject: LockerUnderTest) -> None:
    token = subject.locker.acquire("job:1", 10)
    assert token
    subject.other.release("job:1", "not-the-token")
    assert subject.other.acquire("job:1", 10) is None


def test_a_lock_expires_after_its_ttl(subject: LockerUnderTest) -> None:
    old = subject.locker.acquire("job:1", 0.5)
    assert old
    subject.pass_time(1.0)
    new = subject.other.acquire("job:1", 10)
    assert new and new != old
    # the old holder's late release must not free the new holder's lock
    subject.locker.release("job:1", old)
    assert subject.locker.acquire("job:1", 10) is None


def test_contention_has_exactly_one_winner(subject: LockerUnderTest) -> None:
    winners: list[str] = []
    mutex = threading.Lock()
    start = threading.Barrier(16)

    def grab() -> None:
        start.wait()
        token = subject.locker.acquire("job:hot", 10)
        if token:
            with mutex:
                winners.append(token)

    threads = [threading.Thread(target=grab) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(winners) == 1


def test_the_redis_lock_speaks_tls_with_a_password(tmp_path: Path) -> None:
    server, url, _ = start_redis_tls(tmp_path, password="s3cret")
    try:
        locker = RedisLocker(url)
        token = locker.acquire("job:tls", 10)
        assert token
        assert locker.acquire("job:tls", 10) is None
        locker.release("job:tls", token)
        assert locker.acquire("job:tls", 10)
        wrong = RedisLocker(url.replace("s3cret", "wrong"), client=redis.Redis.from_url(url.replace("s3cret", "wrong")))
        with pytest.raises(LockUnavailable):  # a bad password is an outage to the lifecycle, not a crash
            wrong.acquire("job:tls", 10)
        plain = RedisLocker(
            url, client=redis.Redis.from_url(url.replace("rediss://", "redis://").split("?")[0], socket_timeout=1)
        )
        with pytest.raises(LockUnavailable):  # the server speaks TLS only
            plain.acquire("job:tls", 10)
    finally:
        server.stop()


def test_close_is_not_a_release_and_may_come_twice(subject: LockerUnderTest) -> None:
    token = subject.locker.acquire("job:1", 0.5)
    assert token
    subject.locker.close()
    subject.locker.close()
    assert subject.other.acquire("job:1", 10) is None  # still held, until its TTL
    subject.pass_time(1.0)
    assert subject.other.acquire("job:1", 10)


def test_a_lock_closed_still_works_if_used_again(subject: LockerUnderTest) -> None:
    subject.locker.close()
    token = subject.locker.acquire("job:1", 10)
    assert token
    assert subject.other.acquire("job:1", 10) is None
    subject.locker.release("job:1", token)
    assert subject.other.acquire("job:1", 10)


def test_a_redis_lock_closes_the_connection_of_every_thread_that_used_it(redis_url: str) -> None:
    client = redis.Redis.from_url(url := redis_url)
    locker = RedisLocker(url, client=client, prefix=f"t{uuid.uuid4().hex[:8]}:")
    ports: list[int] = []

    def use(i: int) -> None:
        token = locker.acquire(f"job:{i}", 10)
        assert token
        locker.release(f"job:{i}", token)
        ports.append(locker._local.conn._sock.getsockname()[1])  # this thread's connection

    threads = [threading.Thread(target=use, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    use(3)  # and this thread

    def open_ports() -> set[int]:
        return {int(c["addr"].rsplit(":", 1)[1]) for c in client.client_list()}

    try:
        assert len(set(ports)) == 4 and set(ports) <= open_ports()
        locker.close()
        assert wait_until(lambda: not set(ports) & open_ports())  # the server sees each go
        # a thread that uses it again after the close connects anew, and the next close closes that one too
        use(4)
        assert ports[-1] in open_ports() and ports[-1] not in ports[:4]
        locker.close()
        assert wait_until(lambda: ports[-1] not in open_ports())
    finally:
        locker.close()
        client.close()
