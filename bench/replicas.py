"""Scenarios (m) and (n) of ``bench/fires.py``: ``ticklock serve`` in the replica shape, MongoDB store +
Redis lock.

Usage (through fires.py, which prints the tables)::

    .venv/bin/python bench/fires.py --only m,n [--quick]

It starts PostgreSQL, FerretDB on it and Redis with the helpers of ``tests/support/servers.py``, on
loopback ports, and stops them at the end: for (m) FerretDB 1.24 (its SQLite backend is far too slow for
this), which decodes every document it reads in Go and serves no filter from an index; for (n) FerretDB
2.5 on PostgreSQL with the DocumentDB extension, which stores BSON and uses the store's indexes, as
MongoDB does. It stores the
1,000 jobs of scenario (a) with ``MongoStore.add_jobs`` and runs one ``ticklock serve`` with
``TICKLOCK_STORE=mongodb://127.0.0.1:PORT/ticklock_bench`` and ``TICKLOCK_LOCK=redis://127.0.0.1:PORT/0``.
Fires, lag, lost fires and duplicates are measured as in fires.py, from the ``executions`` collection.

Commands per fire are counted, not timed, so they do not depend on the machine:

* MongoDB: the service's ``ticklock_store_commands_total{command=...}`` (it counts every command its
  pymongo client starts; pymongo's heartbeats are not commands), read from ``/metrics``;
* Redis: the server's ``INFO commandstats`` (the benchmark's own ``info`` calls left out).

Each counter's difference between the window's start and end is divided by the executions that started
between the two readings.
"""

from __future__ import annotations

import collections
import importlib
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import psutil  # type: ignore[import-untyped]
import redis
from _stats import Row, Scenario
from fires import Exec, Seeded, _us, analyse, run_service, seed_due
from prometheus_client.parser import text_string_to_metric_families
from pymongo import MongoClient

REPO = Path(__file__).resolve().parents[1]
DATABASE = "ticklock_bench"
DOCUMENTDB = "v0.106.0-ferretdb-2.5.0"  # tools/documentdb/build.sh
SYSTEMS = {  # scenario key -> the row's system
    "m": "ticklock serve (MongoDB: FerretDB 1.24 on PostgreSQL; Redis lock)",
    "n": "ticklock serve (MongoDB: FerretDB 2.5 on PostgreSQL + DocumentDB; Redis lock)",
}
SEED_CHUNK = 500
STARTUP_ALLOWANCE = 5.0  # s from seeding to the first fire: the service connects to both servers first
TARGET_MONGO_PER_FIRE = 3.0  # commands per fire, amortised (issue 3)
TARGET_REDIS_PER_FIRE = 2.0
# s the service keeps running after the window: on FerretDB 1.24 (m) runs ~3.5 s behind, and fires due
# at the window's end still queued when fires.py's 3 s ran out were counted lost (84 on 2026-12-06 09:02)
REPLICA_DRAIN = 10.0
MAX_EXECUTIONS = 2_000_000  # read back at most this many (a full run writes ~30,000)
METRIC = "ticklock_store_commands"
SERVICE_SAMPLES = (  # read beside the command counts, to tell the dispatcher's pace from the workers'
    "ticklock_tick_seconds_count",
    "ticklock_tick_seconds_sum",
    "ticklock_claimed_total",
    "ticklock_queue_depth",
    "ticklock_skips_total",
)
OWN_REDIS_COMMANDS = ("info",)  # what this script sends to Redis itself
US = 1_000_000


class _Server(Protocol):
    """What this script uses of ``tests.support.servers.Server``."""

    proc: Any

    def stop(self) -> None: ...


@dataclass(frozen=True)
class Snapshot:
    """Counters read at one edge of the window; ``*_at`` are epoch seconds, midway through each reading."""

    mongo_at: float
    mongo: dict[str, float]
    service: dict[str, float]  # SERVICE_SAMPLES from /metrics, each summed over its labels
    redis_at: float
    redis: dict[str, int]
    server_cpu: dict[str, float]  # CPU seconds of each server's process tree
    machine_busy: float  # CPU seconds the whole machine spent busy (all cores, all processes)
    machine_steal: float  # CPU seconds the hypervisor took


@dataclass(frozen=True)
class Servers:
    mongo_uri: str  # with the database
    redis_url: str
    processes: dict[str, _Server]
    versions: str


@dataclass(frozen=True)
class ReplicaRun:
    row: Row
    commands_markdown: str


# -- servers --------------------------------------------------------------------------------------
@contextmanager
def started_servers(workdir: Path, *, ferretdb2: bool = False) -> Iterator[Servers]:
    """PostgreSQL, FerretDB on it (1.24, or with ``ferretdb2`` 2.5 on DocumentDB), and Redis; all stopped on
    the way out, whatever happens."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tests.support import servers

    with ExitStack() as stack:
        try:
            try:
                postgres, postgres_url = servers.start_postgresql(workdir, documentdb=ferretdb2)
            except subprocess.CalledProcessError as exc:
                # initdb or createdb failed (createdb can meet "the database system is starting up": the port
                # opens before PostgreSQL accepts connections); the server it started has no handle: stop it
                stop_children_running("postgres")
                detail = (exc.stderr or b"").decode(errors="replace").strip()[-500:]
                step = next((Path(str(c)).name for c in exc.cmd if str(c).endswith(("initdb", "createdb"))), "?")
                raise RuntimeError(f"starting PostgreSQL failed: {step} said {detail!r}") from exc
            stack.callback(postgres.stop)
            start = servers.start_ferretdb2 if ferretdb2 else servers.start_ferretdb
            ferretdb, mongo_uri = start(workdir, postgresql_url=postgres_url)
            stack.callback(ferretdb.stop)
            redis_server, redis_url = servers.start_redis(workdir)
            stack.callback(redis_server.stop)
        except RuntimeError as exc:
            raise SystemExit(f"bench: {exc}\nbench: run scripts/services.sh (as root) to install the servers") from exc
        pg_version = Path(servers._postgres_bindir()).parent.name
        ferretdb_version = (servers.FERRETDB2 if ferretdb2 else servers.FERRETDB).name.removeprefix("ferretdb-")
        client = redis.Redis.from_url(redis_url)
        try:
            redis_version = client.info("server").get("redis_version", "?")
        finally:
            client.close()
        yield Servers(
            mongo_uri=f"{mongo_uri.rstrip('/')}/{DATABASE}",
            redis_url=redis_url,
            processes={"FerretDB": ferretdb, "PostgreSQL": postgres, "Redis": redis_server},
            versions=f"FerretDB {ferretdb_version} on PostgreSQL {pg_version}"
            + (f" with DocumentDB {DOCUMENTDB}" if ferretdb2 else "")
            + f" (fsync off), Redis {redis_version}",
        )


def stop_children_running(program: str) -> None:
    """Terminate this process's own children whose command line names ``program`` (bounded waits)."""
    children = [c for c in psutil.Process().children() if _runs(c, program)]
    for child in children:
        child.terminate()
    _, alive = psutil.wait_procs(children, timeout=10)
    for child in alive:
        child.kill()
    psutil.wait_procs(alive, timeout=5)


def _runs(proc: Any, program: str) -> bool:
    try:
        return any(program in part for part in proc.cmdline())
    except psutil.Error:
        return False


def tree_cpu(pid: int) -> float:
    """User + system CPU seconds of a process and its live descendants (PostgreSQL: one per connection)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for proc in procs[:1000]:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += float(times.user + times.system)
    return total


# -- counters -------------------------------------------------------------------------------------
def service_metrics(port: int) -> tuple[dict[str, float], dict[str, float]]:
    """``ticklock_store_commands_total`` by command, and SERVICE_SAMPLES, from the service's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5.0) as response:
        text = response.read().decode()
    counts: dict[str, float] = {}
    others = dict.fromkeys(SERVICE_SAMPLES, 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == f"{METRIC}_total":
                counts[sample.labels["command"]] = sample.value
            elif sample.name in others:
                others[sample.name] += sample.value
    return counts, others


def redis_commands(client: redis.Redis) -> dict[str, int]:
    """Calls by command since the server started, from ``INFO commandstats``."""
    stats = client.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): int(value["calls"])
        for name, value in stats.items()
        if name.startswith("cmdstat_") and isinstance(value, Mapping)
    }


def prober(client: redis.Redis, processes: Mapping[str, _Server]) -> Callable[[int], Snapshot]:
    def probe(port: int) -> Snapshot:
        t0 = time.time()
        mongo, service = service_metrics(port)
        t1 = time.time()
        red = redis_commands(client)
        t2 = time.time()
        cpu = {name: tree_cpu(server.proc.pid) for name, server in processes.items()}
        machine = psutil.cpu_times()
        idle = machine.idle + getattr(machine, "iowait", 0.0) + getattr(machine, "steal", 0.0)
        busy = sum(machine) - idle - getattr(machine, "guest", 0.0) - getattr(machine, "guest_nice", 0.0)
        steal = getattr(machine, "steal", 0.0)
        return Snapshot((t0 + t1) / 2, mongo, service, (t1 + t2) / 2, red, cpu, busy, steal)

    return probe


# -- reading back ---------------------------------------------------------------------------------
def read_executions(uri: str) -> list[Exec]:
    client: MongoClient[dict[str, Any]] = MongoClient(uri, tz_aware=True, serverSelectionTimeoutMS=5000)
    fields = {"_id": 0, "job_id": 1, "scheduled_at": 1, "started_at": 1, "finished_at": 1, "status": 1}
    try:
        cursor = client[DATABASE]["executions"].find({}, fields).batch_size(10_000).limit(MAX_EXECUTIONS)
        return [
            Exec(
                d["job_id"],
                _us(d["scheduled_at"]),
                _us(d["started_at"]),
                _us(d["finished_at"]) if d.get("finished_at") is not None else None,
                d["status"],
            )
            for d in cursor
        ]
    finally:
        client.close()


def explain(uri: str, command: dict[str, Any]) -> tuple[str, bool]:
    """What FerretDB says it does with a find (1.24: its pushdown flags; both: PostgreSQL's plan, node by
    node, with the index each scan uses), and whether any node reads the whole collection."""
    client: MongoClient[dict[str, Any]] = MongoClient(uri, tz_aware=True, serverSelectionTimeoutMS=5000)
    try:
        plan = client[DATABASE].command("explain", command)
    finally:
        client.close()
    parts = [f"{k} {plan[k]}" for k in ("filterPushdown", "sortPushdown", "limitPushdown") if k in plan]
    nodes = list(_plan_nodes(plan.get("queryPlanner", {}).get("Plan", {})))
    if nodes:
        steps = [n["Node Type"] + (f" on index `{n['Index Name']}`" if n.get("Index Name") else "") for n in nodes]
        text = "PostgreSQL plan: " + " > ".join(steps)
        filters = [n["Filter"] for n in nodes if n.get("Filter")]
        if filters:
            text += f", filter `{filters[0]}`"
        parts.append(text)
    return "; ".join(parts), any(n["Node Type"] == "Seq Scan" for n in nodes)


def _plan_nodes(node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """A PostgreSQL plan's nodes, outermost first."""
    if node.get("Node Type"):
        yield node
    for child in node.get("Plans", []):
        yield from _plan_nodes(child)


DUE_QUERY: dict[str, Any] = {"find": "jobs", "sort": {"due_at": 1}, "limit": 100}  # + filter due_at <= now
BY_ID_QUERY: dict[str, Any] = {"find": "executions", "filter": {"_id": "x"}}  # what finishing a run selects by


# -- the commands table ---------------------------------------------------------------------------
def started_between(execs: list[Exec], t0: float, t1: float) -> int:
    lo, hi = int(t0 * US), int(t1 * US)
    return sum(1 for e in execs if lo <= e.started < hi)


def workers(serve_args: list[str]) -> int:
    """The service's worker threads: ``--workers`` among ``serve_args``, or the setting's default."""
    from ticklock.settings import SETTINGS

    value = next(s.default for s in SETTINGS if s.name == "workers")
    for i, arg in enumerate(serve_args):
        if arg.startswith("--workers="):
            value = arg.split("=", 1)[1]
        elif arg == "--workers" and i + 1 < len(serve_args):
            value = serve_args[i + 1]
    return int(value)


def scripted_redis_commands() -> set[str]:
    """Commands the lock's Lua scripts call: ``INFO commandstats`` counts them as if a client had sent them."""
    module = importlib.import_module("ticklock.adapters.lock.redis")
    names: set[str] = set()
    for value in vars(module).values():
        if isinstance(value, str) and "redis.call(" in value:
            names |= {m.lower() for m in re.findall(r"redis\.call\(\s*['\"](\w+)['\"]", value)}
    return names


def _per_fire_rows(
    store: str,
    before: Mapping[str, float],
    after: Mapping[str, float],
    fires: int,
    target: float,
    slack: float,
    inside: AbstractSet[str] = frozenset(),
) -> tuple[list[str], float]:
    """Table lines by command, most sent first; commands in ``inside`` are listed but not counted as sent.

    Over the target by less than ``slack`` (what the window's edges can add) is marked ≈, not ✗.
    """
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    delta = {k: v for k, v in delta.items() if v > 0}
    sent = sum(v for k, v in delta.items() if k not in inside)
    per = sent / fires if fires else float("nan")
    lines = []
    for name, count in sorted(delta.items(), key=lambda kv: (kv[0] in inside, -kv[1], kv[0])):
        share = count / fires if fires else float("nan")
        if name in inside:
            lines.append(
                f"| {store} | ({name}: run inside the Lua script, not sent) | ({count:,.0f}) | ({share:.3f}) | |"
            )
        else:
            lines.append(f"| {store} | {name} | {count:,.0f} | {share:.3f} | |")
    mark = "✓" if per <= target else ("≈" if per <= target + slack else "✗")
    lines.insert(
        sum(1 for k in delta if k not in inside),
        f"| {store} | **all sent** | {sent:,.0f} | **{per:.3f}** {mark} | ≤ {target:g} |",
    )
    return lines, per


def commands_markdown(start: Snapshot, end: Snapshot, execs: list[Exec], title: str, threads: int) -> tuple[str, str]:
    """The per-command table and a one-line summary for the row's notes."""
    mongo_fires = started_between(execs, start.mongo_at, end.mongo_at)
    redis_fires = started_between(execs, start.redis_at, end.redis_at)
    red_before = {k: float(v) for k, v in start.redis.items() if k not in OWN_REDIS_COMMANDS}
    red_after = {k: float(v) for k, v in end.redis.items() if k not in OWN_REDIS_COMMANDS}
    inside = scripted_redis_commands()
    # at a reading each worker may hold one fire taken and not let go
    in_flight = threads
    slack = in_flight / mongo_fires if mongo_fires else float("nan")
    mongo_lines, mongo_per = _per_fire_rows(
        "MongoDB", start.mongo, end.mongo, mongo_fires, TARGET_MONGO_PER_FIRE, slack
    )
    redis_lines, redis_per = _per_fire_rows(
        "Redis", red_before, red_after, redis_fires, TARGET_REDIS_PER_FIRE, slack, inside
    )
    table = [
        f"#### Commands per fire, {title}",
        "",
        f"Counted between the two readings at the window's edges: {mongo_fires:,} executions started between "
        f"the MongoDB readings ({end.mongo_at - start.mongo_at:.1f} s), {redis_fires:,} between the Redis ones. "
        "MongoDB: the service's `ticklock_store_commands_total` (every command its pymongo client starts; "
        "heartbeats are not commands). Redis: the server's `INFO commandstats`, less this script's own `info` "
        f"calls; it also counts the calls the lock's Lua script makes ({', '.join(sorted(inside)) or 'none'}), "
        "listed in brackets and not counted as sent. Counts, not times: they do not depend on the machine. "
        f"Each of the {threads} worker threads may be mid-fire at either reading (a fire locked and "
        f"not yet released: {in_flight:,} in all), so a command sent once per fire may read up to ±{slack:.3f} "
        "per fire off (the longer the window, the less); ≈ marks a total over its target by less than that.",
        "",
        "| store | command | in window | per fire | target per fire |",
        "|---|---|---|---|---|",
        *mongo_lines,
        *redis_lines,
    ]
    finds = end.mongo.get("find", 0) - start.mongo.get("find", 0)
    if finds and mongo_fires:
        table += [
            "",
            f"{finds:,.0f} `find`s in the window (the claim reads its candidates with one): one per "
            f"{mongo_fires / finds:,.0f} fires.",
        ]
    summary = (
        f"commands sent per fire (counted): MongoDB {mongo_per:.3f} (target ≤ {TARGET_MONGO_PER_FIRE:g}), "
        f"Redis {redis_per:.3f} (target ≤ {TARGET_REDIS_PER_FIRE:g}); by command in the table below"
    )
    return "\n".join(table), summary


def dispatcher_note(start: Snapshot, end: Snapshot) -> str:
    """Claim rounds and the queue, from the service's own metrics: which side sets the pace."""
    delta = {k: end.service[k] - start.service[k] for k in SERVICE_SAMPLES}
    rounds = delta["ticklock_tick_seconds_count"]
    spent = delta["ticklock_tick_seconds_sum"]
    seconds = end.mongo_at - start.mongo_at
    mean = f"{1000 * spent / rounds:.0f} ms" if rounds else "-"
    return (
        f"dispatcher in the window: {rounds:,.0f} claim rounds, {mean} each on average ({spent:.1f} s of "
        f"{seconds:.0f} s spent claiming), {delta['ticklock_claimed_total']:,.0f} jobs claimed; fires waiting for "
        f"a worker: {start.service['ticklock_queue_depth']:,.0f} at the start, "
        f"{end.service['ticklock_queue_depth']:,.0f} at the end; fires skipped: {delta['ticklock_skips_total']:,.0f}"
    )


# -- the scenario ---------------------------------------------------------------------------------
def run_mongo_redis(sc: Scenario, command: str, serve_args: list[str], label: str | None = None) -> ReplicaRun:
    """Scenario ``sc`` (interval jobs; (m) or (n)) on FerretDB + Redis; servers started here and stopped on
    the way out."""
    from ticklock.adapters.store.mongo import MongoStore

    ferretdb2 = sc.key == "n"
    system = " ".join([SYSTEMS[sc.key], *([f"[{label}]"] if label else []), *serve_args])
    with (
        tempfile.TemporaryDirectory(prefix=f"ticklock-bench-{sc.key}-") as tmp,
        started_servers(Path(tmp), ferretdb2=ferretdb2) as srv,
    ):
        store = MongoStore(srv.mongo_uri, database=DATABASE)
        try:
            began = time.monotonic()
            seeded = seed_due(store, sc, allowance=STARTUP_ALLOWANCE, chunk=SEED_CHUNK)
            seed_s = time.monotonic() - began
        finally:
            store.close()
        # BSON dates hold milliseconds: compare the chains with what the store keeps
        seeded = Seeded({k: v // 1000 * 1000 for k, v in seeded.first_fire.items()}, seeded.first_fire_at)
        due_plan, due_scans = explain(srv.mongo_uri, {**DUE_QUERY, "filter": {"due_at": {"$lte": datetime.now(UTC)}}})
        by_id_plan, by_id_scans = explain(srv.mongo_uri, BY_ID_QUERY)
        start = seeded.first_fire_at + sc.warmup
        client = redis.Redis.from_url(srv.redis_url, socket_timeout=5.0)
        try:
            run = run_service(
                None,
                Path(tmp),
                (start, start + sc.window),
                command,
                serve_args,
                extra_env={"TICKLOCK_STORE": srv.mongo_uri, "TICKLOCK_LOCK": srv.redis_url},
                probe=prober(client, srv.processes),
                drain=REPLICA_DRAIN,
            )
        finally:
            client.close()
        execs = read_executions(srv.mongo_uri)
    row = analyse(sc, seeded, execs, run)
    row.system = system
    if len(run.probes) != 2:
        row.details.append("the counters could not be read at both edges of the window")
        return ReplicaRun(row, "")
    begin, end = run.probes
    table, summary = commands_markdown(begin, end, execs, f"({sc.key}) {sc.title}", workers(serve_args))
    seconds = end.mongo_at - begin.mongo_at
    server_cpu = {name: end.server_cpu[name] - begin.server_cpu[name] for name in begin.server_cpu}
    cpu = ", ".join(f"{name} {value:.1f} s" for name, value in server_cpu.items())
    busy = end.machine_busy - begin.machine_busy
    others = busy - run.cpu_s - sum(server_cpu.values())
    steal = end.machine_steal - begin.machine_steal
    cores = psutil.cpu_count() or 1
    row.details[:0] = [
        summary,
        f"servers: {srv.versions}, on the same {cores} cores as the service; their CPU in the "
        f"window ({seconds:.0f} s): {cpu}; the whole machine was busy {busy:.1f} s of {cores * seconds:.0f} "
        f"({max(0.0, others):.1f} s by other processes, this script included; {steal:.1f} s stolen by the hypervisor)",
        (
            f"only the {sc.due:,} due jobs are stored, as in (m), so that both FerretDBs run one workload "
            f"(explain of the due query: {due_plan}); seeded in {seed_s:.1f} s"
            if ferretdb2
            else f"only the {sc.due:,} due jobs are stored (the SQLite rows of a, b and d store 100,000, 20,000 "
            "with --quick): FerretDB 1.24 does not push range filters or sorts down to PostgreSQL, so every due "
            f"query reads the whole jobs collection (explain of the due query: {due_plan}); seeded in {seed_s:.1f} s"
        ),
        f"explain of a find by _id on executions (what finishing a run selects by): {by_id_plan}"
        + (
            ": FerretDB reads the whole collection to find one document by _id, so finishing a run gets "
            f"slower as executions grow (~{sc.nominal_rate or 0:,.0f} a second at full rate; nothing is pruned "
            "during the run)"
            if by_id_scans
            else ""
        ),
    ]
    row.details.insert(1, dispatcher_note(begin, end))
    if not due_scans and not ferretdb2:
        row.details.append("the due query did not scan the jobs collection: more jobs could be stored")
    statuses = collections.Counter(e.status for e in execs)
    if set(statuses) - {"success"}:
        row.details.append(f"executions by status over the whole run: {dict(statuses)}")
    return ReplicaRun(row, table)
