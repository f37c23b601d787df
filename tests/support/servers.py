"""Real servers for the tests, each started on a free loopback port by the test run itself.

The binaries come from ``make services`` (Debian's redis-server, prometheus-pushgateway and postgresql,
FerretDB 1.24 built from tools/ferretdb, FerretDB 2.5 from tools/ferretdb2 with the DocumentDB extension
from tools/documentdb). A missing one fails the test that needs it, with the command that installs it:
no test is skipped for want of a server.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
FERRETDB = Path(os.environ.get("TICKLOCK_FERRETDB_BIN", Path.home() / ".cache/ticklock/bin/ferretdb-v1.24.2"))
FERRETDB2 = Path(os.environ.get("TICKLOCK_FERRETDB2_BIN", Path.home() / ".cache/ticklock/bin/ferretdb-v2.5.0"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def binary(name: str, path: Path | None = None) -> str:
    found = str(path) if path and path.exists() else shutil.which(name)
    if not found:
        raise RuntimeError(f"{name} is not installed: run `make services` (the test command does)")
    return found


class Server:
    """A server process, stopped at the end of the test session."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        ready: Callable[[], bool],
        log: Path,
        cleanup: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.cleanup = cleanup
        self.env = env
        self.name = name
        self.argv = argv
        self.ready = ready
        self.log_path = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            # a session of its own: stop() signals the whole group (runuser does not pass signals on)
            self.proc = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=self.env
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.proc.returncode}: {self.log_path.read_text()[-2000:]}"
                )
            if self.ready():
                return
            time.sleep(0.05)
        told = self.log_path.read_text()[-2000:]  # read before ``stop`` removes a cleanup folder holding it
        self.stop()  # not left running behind the error (a FerretDB holding its PostgreSQL's connections)
        raise RuntimeError(f"{self.name} did not start: {told}")

    @property
    def pid(self) -> int:
        """The running server's process id (its CPU is measured by the load tests)."""
        assert self.proc is not None, f"{self.name} is not started"
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        if self.cleanup is not None:
            shutil.rmtree(self.cleanup, ignore_errors=True)


def _port_open(port: int) -> Callable[[], bool]:
    def check() -> bool:
        with socket.socket() as s:
            s.settimeout(0.2)
            return s.connect_ex(("127.0.0.1", port)) == 0

    return check


def start_redis(workdir: Path) -> tuple[Server, str]:
    port = free_port()
    argv = [
        binary("redis-server"),
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(workdir),
    ]
    return Server("redis", argv, _port_open(port), workdir / "redis.log"), f"redis://127.0.0.1:{port}/0"


def self_signed_certificate(cert: Path, key: Path) -> None:
    """A certificate for 127.0.0.1 that is its own authority, and its key, made by openssl."""
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )


def start_redis_tls(workdir: Path, password: str) -> tuple[Server, str, Path]:
    """Redis on TLS only, with a password; returns the server, a rediss:// URL and the CA certificate."""
    port = free_port()
    ca, cert, key = workdir / "ca.pem", workdir / "redis.pem", workdir / "redis.key"
    self_signed_certificate(cert, key)
    shutil.copy(cert, ca)  # self-signed: the certificate is its own authority
    argv = [
        binary("redis-server"),
        "--port",
        "0",
        "--tls-port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--tls-cert-file",
        str(cert),
        "--tls-key-file",
        str(key),
        "--tls-ca-cert-file",
        str(ca),
        "--tls-auth-clients",
        "no",
        "--requirepass",
        password,
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(workdir),
    ]
    server = Server("redis-tls", argv, _port_open(port), workdir / "redis-tls.log")
    return server, f"rediss://:{password}@127.0.0.1:{port}/0?ssl_ca_certs={ca}", ca


def start_ferretdb(workdir: Path, *, postgresql_url: str | None = None) -> tuple[Server, str]:
    """FerretDB on its SQLite backend, or on PostgreSQL when ``postgresql_url`` is given."""
    port = free_port()
    if postgresql_url:
        backend = f"--postgresql-url={postgresql_url}"
    else:
        data = workdir / "ferretdb-data"
        data.mkdir(exist_ok=True)
        backend = f"--sqlite-url=file:{data}/"
    argv = [binary("ferretdb", FERRETDB), f"--listen-addr=127.0.0.1:{port}", backend]
    return Server("ferretdb", argv, _port_open(port), workdir / "ferretdb.log"), f"mongodb://127.0.0.1:{port}/"


def start_ferretdb2(workdir: Path, *, postgresql_url: str) -> tuple[Server, str]:
    """FerretDB 2.5 on a PostgreSQL started with ``start_postgresql(..., documentdb=True)``."""
    port = free_port()
    state = workdir / "ferretdb2-state"
    state.mkdir(exist_ok=True)
    argv = [
        binary("ferretdb2", FERRETDB2),
        f"--listen-addr=127.0.0.1:{port}",
        f"--postgresql-url={postgresql_url}",
        f"--state-dir={state}",
    ]
    return Server("ferretdb2", argv, _port_open(port), workdir / "ferretdb2.log"), f"mongodb://127.0.0.1:{port}/"


# FerretDB 1.24 on PostgreSQL deadlocks when its connection pool (50 by default) runs out while a request
# holds its metadata registry's write lock (creating a collection, at a replica's start): that request waits
# for a connection, and the 50 holding one wait for the lock (seen in tests/e2e/test_replicas.py, three
# replicas of ~50 threads each starting at once; the goroutine dump: Registry.getPool in RWMutex.RLock,
# pgxpool.Acquire in semaphore.Acquire). A pool larger than the requests the tests can have in flight at
# once, and a server that takes that many connections, cannot run out.
FERRETDB_PG_POOL = 400
PG_MAX_CONNECTIONS = 500


# What FerretDB 2's PostgreSQL runs with: DocumentDB's libraries loaded at start, and the settings of
# FerretDB's own postgres-documentdb image (packaging/10-preload.sh of DocumentDB v0.106.0-ferretdb-2.5.0);
# pg_cron's jobs in the database FerretDB uses, and DocumentDB's background index builds scheduled every
# minute, not every 2 s (Debian 12's pg_cron 1.4 takes no "N seconds" schedule: tools/documentdb/build.sh)
DOCUMENTDB_SETTINGS = [
    "shared_preload_libraries=pg_cron,pg_documentdb_core,pg_documentdb",
    "cron.database_name=ferretdb",
    "documentdb.indexBuildScheduleInSec=60",
    "documentdb.enableCompact=true",
    "documentdb.enableLetAndCollationForQueryMatch=true",
    "documentdb.enableNowSystemVariable=true",
    "documentdb.enableSortbyIdPushDownToPrimaryKey=true",
    "documentdb.enableSchemaValidation=true",
    "documentdb.enableBypassDocumentValidation=true",
    "documentdb.enableUserCrud=true",
    "documentdb.maxUserLimit=100",
]


def start_postgresql(workdir: Path, *, documentdb: bool = False) -> tuple[Server, str]:
    """A throwaway PostgreSQL cluster (Debian's postgresql), durability off: it backs FerretDB in tests.
    With ``documentdb``, its database has the DocumentDB extension (FerretDB 2's backend)."""
    bindir = _postgres_bindir()
    port = free_port()
    as_user: list[str] = []
    if os.geteuid() == 0:
        # PostgreSQL refuses to run as root, and its user cannot enter pytest's private temp folders
        workdir = Path(tempfile.mkdtemp(prefix="ticklock-pg-"))
        shutil.chown(workdir, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data = workdir / "pgdata"
    subprocess.run(
        [*as_user, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "ferret", "-E", "UTF8"],
        check=True,
        capture_output=True,
    )
    argv = [
        *as_user,
        str(bindir / "postgres"),
        "-D",
        str(data),
        "-p",
        str(port),
        "-h",
        "127.0.0.1",
        "-k",
        str(workdir),
        "-c",
        "fsync=off",
        "-c",
        "synchronous_commit=off",
        "-c",
        "full_page_writes=off",
        "-c",
        f"max_connections={PG_MAX_CONNECTIONS}",
    ]
    if documentdb:
        argv += [arg for setting in DOCUMENTDB_SETTINGS for arg in ("-c", setting)]
    server = Server("postgresql", argv, _port_open(port), workdir / "postgresql.log", cleanup=workdir)
    # the port opens before the server accepts connections ("the database system is starting up")
    createdb = [*as_user, str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "ferret", "ferretdb"]
    for _ in range(100):
        done = subprocess.run(createdb, capture_output=True, text=True)
        if done.returncode == 0:
            url = f"postgres://ferret@127.0.0.1:{port}/ferretdb?pool_max_conns={FERRETDB_PG_POOL}"
            if documentdb:
                try:
                    psql(url, "CREATE EXTENSION documentdb CASCADE")
                except BaseException:  # psql's error, its timeout, an interrupt: the server is not left running
                    server.stop()
                    raise
            return server, url
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"createdb failed: {done.stderr}")


def psql(postgres_url: str, sql: str) -> str:
    """``sql`` run by ``psql`` on the server at ``postgres_url`` (one of ``start_postgresql``'s), stopping at
    the first error (raised with psql's message); what it printed, unaligned."""
    url = postgres_url.split("?")[0]  # psql takes no pgx pool settings
    argv = [str(_postgres_bindir() / "psql"), url, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"psql failed: {done.stderr.strip()}")
    return done.stdout


def _postgres_bindir() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))
    if not found:
        raise RuntimeError("PostgreSQL is not installed: run `make services` (the test command does)")
    return found[-1].parent


def start_pushgateway(workdir: Path) -> tuple[Server, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return httpx.get(f"{url}/-/ready", timeout=0.5).status_code == 200
        except httpx.HTTPError:
            return False

    argv = [binary("prometheus-pushgateway"), f"--web.listen-address=127.0.0.1:{port}"]
    return Server("pushgateway", argv, ready, workdir / "pushgateway.log"), url


def start_moto(workdir: Path) -> tuple[Server, str]:
    """moto in server mode as a process of its own (the session's in-process one shares the tests' GIL,
    which a load test cannot afford)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return httpx.get(f"{url}/moto-api/", timeout=0.5).status_code == 200
        except httpx.HTTPError:
            return False

    # moto's own command line logs every request, a tenth of its time under load: quiet, as a script
    script = (
        "import sys, threading; from moto.server import ThreadedMotoServer; "
        "s = ThreadedMotoServer(ip_address='127.0.0.1', port=int(sys.argv[1]), verbose=False); "
        "s.start(); threading.Event().wait()"
    )
    argv = [sys.executable, "-c", script, str(port)]
    return Server("moto", argv, ready, workdir / "moto.log"), url


MINISTACK = REPO / ".cache" / "ministack-venv" / "bin" / "python"


def start_ministack(workdir: Path, **env: str) -> tuple[Server, str]:
    """MiniStack (tools/ministack, installed by scripts/emulator-venv.sh) on a loopback port, started by
    ``tools/ministack/launch.py`` under its own venv's interpreter with ``env`` added (``MS_RATE_DIVISOR``...).
    Its scratch files (a deployed function's unpacked code) go under ``workdir/tmp``, removed at stop; its
    function workers are in its process group, stopped with it."""
    if not MINISTACK.exists():
        raise RuntimeError("MiniStack is not installed: run `make services` (scripts/emulator-venv.sh)")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    scratch = workdir / "tmp"
    scratch.mkdir(parents=True, exist_ok=True)

    def ready() -> bool:
        try:
            return httpx.get(f"{url}/_ministack/health", timeout=0.5).status_code == 200
        except httpx.HTTPError:
            return False

    environ = {**os.environ, "GATEWAY_PORT": str(port), "BIND_HOST": "127.0.0.1", "TMPDIR": str(scratch), **env}
    argv = [str(MINISTACK), str(REPO / "tools" / "ministack" / "launch.py")]
    return Server("ministack", argv, ready, workdir / "ministack.log", cleanup=scratch, env=environ), url
