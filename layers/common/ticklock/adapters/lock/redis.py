"""The Redis lock: ``SET job:<id> <token> NX PX <ttl>``, changed afterwards only by its holder.

Release (compare-and-delete) and extend (compare-and-pexpire) are Lua scripts, so that a holder whose lock
expired and was taken by someone else cannot touch the new holder's lock. Any Redis error (refused,
timeout, auth, a failover) raises ``LockUnavailable``; the fire path then applies the configured policy
(skip by default). ``rediss://`` URLs use TLS; a password or ACL user goes in the URL. One client per URL
per process, with redis-py's own pool and retry: a command that meets a broken connection (Redis
restarted) or a read-only replica (a failover) is sent once more on a new connection; a second failure
is an outage, and the next command connects afresh.
"""

from __future__ import annotations

import threading

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ticklock.domain.ids import new_token
from ticklock.errors import LockUnavailable

_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""
_EXTEND = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_clients: dict[str, redis.Redis] = {}
_mutex = threading.Lock()


def shared_client(url: str) -> redis.Redis:
    with _mutex:
        client = _clients.get(url)
        if client is None:
            client = redis.Redis.from_url(
                url,
                # short timeouts: a lock that cannot be had quickly is a lock backend outage, not a wait
                socket_timeout=1.0,
                socket_connect_timeout=1.0,
                # once more at once on a new connection; READONLY: a replica answers on the old primary's
                # address after a failover, and a new connection may reach the new primary. No periodic
                # PING (health_check_interval): the pool polls a connection before lending it
                retry=Retry(NoBackoff(), 1),
                retry_on_error=[redis.ReadOnlyError],
            )
            _clients[url] = client
        return client


def _ms(ttl: float) -> int:
    return max(1, int(ttl * 1000))


class RedisLocker:
    """The ``Locker`` port on Redis."""

    def __init__(self, url: str, *, client: redis.Redis | None = None, prefix: str = "") -> None:
        self._client = client or shared_client(url)
        self._prefix = prefix
        self._release = self._client.register_script(_RELEASE)  # EVALSHA; loaded again after NOSCRIPT
        self._extend = self._client.register_script(_EXTEND)

    def acquire(self, key: str, ttl: float) -> str | None:
        token = new_token()
        name = self._prefix + key
        try:
            if self._client.set(name, token, nx=True, px=_ms(ttl)):
                return token
            # refused: but if the first SET landed before its answer was lost and redis-py sent it again,
            # the key holds this very token, and the lock is this caller's
            return token if self._client.get(name) in (token.encode(), token) else None
        except redis.RedisError as exc:
            raise LockUnavailable(f"Redis: {exc}") from exc

    def release(self, key: str, token: str) -> None:
        try:
            self._release(keys=[self._prefix + key], args=[token])
        except redis.RedisError as exc:
            raise LockUnavailable(f"Redis: {exc}") from exc

    def extend(self, key: str, token: str, ttl: float) -> bool:
        if ttl <= 0:
            raise ValueError(f"a lock is extended by a positive ttl, not {ttl}")
        try:
            return bool(self._extend(keys=[self._prefix + key], args=[token, _ms(ttl)]))
        except redis.RedisError as exc:
            raise LockUnavailable(f"Redis: {exc}") from exc

    def close(self) -> None:
        """Close the client's connections, every thread's: the client is shared by the URL's lockers, so
        call it when the process is done with the lock, with no command under way (one cut off is an
        outage to its caller). A command after this connects again."""
        self._client.connection_pool.disconnect()

    def ping(self) -> None:
        try:
            self._client.ping()
        except redis.RedisError as exc:
            raise LockUnavailable(f"Redis: {exc}") from exc
