"""The Redis lock: ``SET job:<id> <token> NX PX <ttl>``, released only by its holder.

Release is compare-and-delete in one Lua script, so a holder whose lock expired and was taken by someone
else cannot delete the new holder's lock. Any Redis error (refused, timeout, auth, a failover) raises
``LockUnavailable``; the lifecycle then applies the configured policy (skip by default). ``rediss://``
URLs use TLS; a password or ACL user goes in the URL. One client per URL per process.

The two commands of a fire go over a connection per thread, made from the client's pool (so with the
URL's TLS, credentials and timeouts), not through the client's command layers: those (retries, response
callbacks, the pool's per-command health poll, observability hooks) took ~240 us of CPU per fire of the
~95 us the two round trips need. A connection that broke (Redis restarted, a failover) is made again and
the command sent once more; a second failure is an outage.
"""

from __future__ import annotations

import hashlib
import threading
import uuid

import redis
from redis.connection import AbstractConnection as Connection
from redis.exceptions import NoScriptError

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


def _pack(args: tuple[str | int, ...]) -> bytes:
    """A command in RESP (an array of bulk strings), as redis-py's serializer writes it, in a tenth of the time."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg.encode() if isinstance(arg, str) else b"%d" % arg
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def _text(value: object) -> str | None:
    return value.decode() if isinstance(value, bytes) else value if isinstance(value, str) else None


class RedisLocker:
    """The ``Locker`` port on Redis."""

    def __init__(self, url: str, *, client: redis.Redis | None = None, prefix: str = "") -> None:
        self._client = client or shared_client(url)
        self._prefix = prefix
        self._release_sha = hashlib.sha1(_RELEASE.encode()).hexdigest()
        self._local = threading.local()
        self._made: set[Connection] = set()
        self._made_lock = threading.Lock()
        self._closes = 0  # ``close`` calls so far: a thread's connection made before the last is not used again

    def acquire(self, key: str, ttl: float) -> str | None:
        token = uuid.uuid4().hex
        name = self._prefix + key
        try:
            try:
                taken = self._send("SET", name, token, "NX", "PX", max(1, int(ttl * 1000)))
            except (redis.ConnectionError, redis.TimeoutError):
                # once more, on a new connection; the first SET may have landed before its answer was lost,
                # in which case the key holds this very token: then the lock is this caller's
                taken = self._send("SET", name, token, "NX", "PX", max(1, int(ttl * 1000)))
                if not taken and _text(self._send("GET", name)) == token:
                    taken = True
        except redis.RedisError as exc:
            raise LockUnavailable(f"Redis: {exc}") from exc
        return token if taken else None

    def release(self, key: str, token: str) -> None:
        try:
            try:
                self._command("EVALSHA", self._release_sha, 1, self._prefix + key, token)
            except NoScriptError:  # a Redis that restarted, or another one after a failover: load it again
                self._command("EVAL", _RELEASE, 1, self._prefix + key, token)
        except redis.RedisError as exc:
            raise LockUnavailable(f"Redis: {exc}") from exc

    def _command(self, *args: str | int) -> object:
        try:
            return self._send(*args)
        except (redis.ConnectionError, redis.TimeoutError):  # once more, on a new connection
            return self._send(*args)

    def _send(self, *args: str | int) -> object:
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None or self._local.closes != self._closes:
            # made as the client's pool makes its own (the URL's host, TLS, credentials, timeouts), but not
            # counted against the pool's limit: one per thread (made afresh after a ``close``, so that the
            # next ``close`` closes it too)
            pool = self._client.connection_pool
            conn = self._local.conn = pool.connection_class(**pool.connection_kwargs)
            with self._made_lock:
                self._local.closes = self._closes
                self._made.add(conn)
        try:
            conn.send_packed_command([_pack(args)])
            return conn.read_response()
        except redis.ReadOnlyError:
            self._drop(conn)  # a replica (after a failover): the next command connects afresh
            raise
        except redis.ResponseError:
            raise  # Redis answered: the connection is fine
        except BaseException:
            self._drop(conn)
            raise

    def _drop(self, conn: Connection) -> None:
        conn.disconnect()  # type: ignore[no-untyped-call]
        self._local.conn = None
        with self._made_lock:
            self._made.discard(conn)

    def close(self) -> None:
        """Close the threads' connections (the shared client's pool is the client's own). Call it once no
        command is under way (a connection is one thread's: closing it under a command breaks that
        command). A thread that sends a command after this makes a new one, which the next ``close``
        closes."""
        with self._made_lock:
            made, self._made = self._made, set()
            self._closes += 1
        for conn in made:
            conn.disconnect()  # type: ignore[no-untyped-call]

    def ping(self) -> None:
        try:
            self._client.ping()
        except redis.RedisError as exc:
            raise LockUnavailable(f"Redis: {exc}") from exc
