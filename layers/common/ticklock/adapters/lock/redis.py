"""The Redis lock: ``SET job:<id> <token> NX PX <ttl>``, released only by its holder.

Release is compare-and-delete in one Lua script, so a holder whose lock expired and was taken by someone
else cannot delete the new holder's lock. Any Redis error (refused, timeout, auth, a failover) raises
``LockUnavailable``; the lifecycle then applies the configured policy (skip by default). ``rediss://``
URLs use TLS; a password or ACL user goes in the URL. One client per URL per process.
"""

from __future__ import annotations

import threading
import uuid

import redis
from redis.commands.core import Script

from ticklock.errors import LockUnavailable

_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""
_clients: dict[str, redis.Redis] = {}
_mutex = threading.Lock()


def shared_client(url: str) -> redis.Redis:
    with _mutex:
        client = _clients.get(url)
        if client is None:
            # short timeouts: a lock that cannot be had quickly is a lock backend outage, not a wait
            client = redis.Redis.from_url(
                url, socket_timeout=1.0, socket_connect_timeout=1.0, health_check_interval=30, retry_on_timeout=False
            )
            _clients[url] = client
        return client


class RedisLocker:
    """The ``Locker`` port on Redis."""

    def __init__(self, url: str, *, client: redis.Redis | None = None, prefix: str = "") -> None:
        self._client = client or shared_client(url)
        self._prefix = prefix
        self._release: Script = self._client.register_script(_RELEASE)

    def acquire(self, key: str, ttl: float) -> str | None:
        token = uuid.uuid4().hex
        try:
            taken = self._client.set(self._prefix + key, token, nx=True, px=max(1, int(ttl * 1000)))
        except redis.RedisError as exc:
            raise LockUnavailable(f"Redis: {exc}") from exc
        return token if taken else None

    def release(self, key: str, token: str) -> None:
        try:
            self._release(keys=[self._prefix + key], args=[token])
        except redis.RedisError as exc:
            raise LockUnavailable(f"Redis: {exc}") from exc

    def ping(self) -> None:
        try:
            self._client.ping()
        except redis.RedisError as exc:
            raise LockUnavailable(f"Redis: {exc}") from exc
