"""The Locker port's contract, run unchanged on every adapter."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis

from tests.support.cut_proxy import CutProxy
from tests.support.delay_proxy import DelayProxy
from tests.support.servers import free_port, start_redis, start_redis_tls
from tests.support.waiting import wait_until
from ticklock.adapters.lock.local import LocalLocker
from ticklock.adapters.lock.redis import RedisLocker, shared_client
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
        with pytest.raises(LockUnavailable):
            locker.extend("job:1", "token", 10)
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


def test_the_holder_extends_its_lock_past_its_ttl(subject: LockerUnderTest) -> None:
    token = subject.locker.acquire("job:1", 0.5)
    assert token
    assert subject.locker.extend("job:1", token, 10) is True
    subject.pass_time(1.0)
    assert subject.other.acquire("job:1", 10) is None  # still held, past the first TTL
    subject.locker.release("job:1", token)  # and still the holder's to give back
    assert subject.other.acquire("job:1", 10)


def test_extend_counts_the_ttl_from_now_even_when_that_is_sooner(subject: LockerUnderTest) -> None:
    token = subject.locker.acquire("job:1", 10)
    assert token
    assert subject.locker.extend("job:1", token, 0.5) is True
    subject.pass_time(1.0)
    assert subject.other.acquire("job:1", 10)


def test_extend_by_someone_else_does_nothing(subject: LockerUnderTest) -> None:
    token = subject.locker.acquire("job:1", 0.5)
    assert token
    assert subject.other.extend("job:1", "not-the-token", 10) is False
    subject.pass_time(1.0)
    assert subject.other.acquire("job:1", 10)  # it lapsed at its own TTL


def test_a_lapsed_lock_taken_by_another_holder_is_not_extended(subject: LockerUnderTest) -> None:
    old = subject.locker.acquire("job:1", 0.5)
    assert old
    subject.pass_time(1.0)
    new = subject.other.acquire("job:1", 0.5)
    assert new
    assert subject.locker.extend("job:1", old, 10) is False
    subject.pass_time(1.0)
    # the new holder's lock kept its own TTL: the old holder's extend did not touch it
    assert subject.locker.acquire("job:1", 10)
    assert subject.other.extend("job:1", new, 10) is False  # and it lapsed for its holder too


def test_a_lapsed_lock_is_not_brought_back_by_extend(subject: LockerUnderTest) -> None:
    token = subject.locker.acquire("job:1", 0.5)
    assert token
    subject.pass_time(1.0)
    assert subject.locker.extend("job:1", token, 10) is False
    assert subject.other.acquire("job:1", 10)


def test_a_released_lock_is_not_extended(subject: LockerUnderTest) -> None:
    token = subject.locker.acquire("job:1", 10)
    assert token
    subject.locker.release("job:1", token)
    assert subject.locker.extend("job:1", token, 10) is False
    assert subject.other.acquire("job:1", 10)


def test_extend_refuses_a_ttl_that_is_not_positive(subject: LockerUnderTest) -> None:
    token = subject.locker.acquire("job:1", 10)
    assert token
    for ttl in (0, -1):
        with pytest.raises(ValueError, match="positive"):
            subject.locker.extend("job:1", token, ttl)
    assert subject.other.acquire("job:1", 10) is None  # still held as it was


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


def test_close_closes_the_connections_of_every_thread_and_a_later_command_connects_again(redis_url: str) -> None:
    name = f"lock{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(redis_url, client_name=name)  # its connections named, for CLIENT LIST
    observer = redis.Redis.from_url(redis_url)
    locker = RedisLocker(redis_url, client=client, prefix=f"{name}:")
    start = threading.Barrier(4)

    def use(i: int) -> None:
        token = locker.acquire(f"job:{i}", 10)
        assert token
        locker.release(f"job:{i}", token)

    def use_with_others(i: int) -> None:
        start.wait()  # the four at once: the pool opens a connection for each that finds none free
        use(i)

    def connections() -> int:
        return sum(1 for c in observer.client_list() if c["name"] == name)

    try:
        threads = [threading.Thread(target=use_with_others, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert connections() >= 1
        locker.close()
        assert wait_until(lambda: connections() == 0)  # the server sees each go
        use(4)  # used again after the close: it connects anew, and the next close closes that too
        assert connections() == 1
        locker.close()
        assert wait_until(lambda: connections() == 0)
    finally:
        locker.close()
        client.close()
        observer.close()


def test_one_client_per_url_per_process(redis_url: str) -> None:
    assert shared_client(redis_url) is shared_client(redis_url)
    assert shared_client(redis_url) is not shared_client(redis_url.replace("/0", "/1"))


def test_a_set_whose_answer_was_lost_but_which_landed_is_the_callers(redis_url: str) -> None:
    port = urlsplit(redis_url).port
    assert port
    observer = redis.Redis.from_url(redis_url)
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    with CutProxy(port) as proxy:
        locker = RedisLocker(f"redis://127.0.0.1:{proxy.port}/0", prefix=prefix)
        try:
            assert locker.acquire("job:warm", 10)  # connected: the connection's handshake has passed
            proxy.lose_next_answer()
            token = locker.acquire("job:1", 10)  # sent once more on a new connection, and refused there
            assert proxy.cuts == 1
            assert token
            assert observer.get(f"{prefix}job:1") == token.encode()
        finally:
            locker.close()
            observer.close()


def test_after_a_failover_a_replica_is_an_outage_and_the_next_command_reconnects(
    tmp_path: Path, redis_url: str
) -> None:
    demoted, demoted_url = start_redis(tmp_path)
    demoted_port, promoted_port = urlsplit(demoted_url).port, urlsplit(redis_url).port
    assert demoted_port and promoted_port
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    admin = redis.Redis.from_url(demoted_url)
    promoted = redis.Redis.from_url(redis_url)
    try:
        with DelayProxy(demoted_port, 0.0) as address:  # the address the lock knows, as DNS would give it
            locker = RedisLocker(f"redis://127.0.0.1:{address.port}/0", prefix=prefix)
            try:
                assert locker.acquire("job:1", 10)
                admin.replicaof("127.0.0.1", str(promoted_port))  # the failover: the old primary is a replica
                with pytest.raises(LockUnavailable, match="read only"):
                    locker.acquire("job:2", 10)  # the address still leads to the replica
                address.upstream = ("127.0.0.1", promoted_port)  # now to the new primary
                token = locker.acquire("job:2", 10)
                assert token
                assert promoted.get(f"{prefix}job:2") == token.encode()
            finally:
                locker.close()
    finally:
        admin.close()
        promoted.close()
        demoted.stop()


def test_scripts_that_redis_forgot_are_loaded_again(redis_url: str) -> None:
    observer = redis.Redis.from_url(redis_url)
    locker = RedisLocker(redis_url, prefix=f"t{uuid.uuid4().hex[:8]}:")
    try:
        token = locker.acquire("job:1", 0.5)
        assert token
        locker.release("job:0", "token")  # the scripts are loaded
        observer.script_flush()  # as a restarted Redis, or another one after a failover, has forgotten them
        assert locker.extend("job:1", token, 10) is True
        observer.script_flush()
        locker.release("job:1", token)
        assert locker.acquire("job:1", 10)
    finally:
        locker.close()
        observer.close()
