"""The local service: ``ticklock serve``. One process runs the dispatcher, the worker pool, the API and
``/metrics`` on the embedded SQLite store.

Shutdown (SIGTERM or SIGINT): dispatching stops at once; fires claimed but not started go back to the
store (due again); running fires get ``shutdown_grace`` seconds to finish; any still running after that
are cut off, recorded as ``interrupted`` and released, so the next claim - by this service after a
restart, or by another replica - resumes them. Nothing claimed is lost.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import logging
import os
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from ticklock.adapters.metrics.pushgateway import PushgatewayMetrics
from ticklock.adapters.queue.local import BATCH, CALLER_BATCH, RELIEVE_AFTER, WorkerPool
from ticklock.api import server as http_server
from ticklock.api.asgi import local_app
from ticklock.api.routes import ApiDeps
from ticklock.clock import Clock, SystemClock
from ticklock.domain.invoke import STAY, Placement
from ticklock.errors import ConfigError
from ticklock.handlers.contract import Registry
from ticklock.runtimes.plugins import Plugins
from ticklock.runtimes.wiring import (
    build_dispatcher,
    build_locker,
    build_metrics,
    build_publisher,
    build_runner,
    build_service,
    build_store,
    housekeep,
)
from ticklock.settings import Cpus, Settings

log = logging.getLogger("ticklock.service")
HOUSEKEEPING_EVERY = 60.0
FIRE_SUMMARY_EVERY = 1.0  # seconds between fires.summary lines (none while no fire runs)


@dataclass
class LocalService:
    """Everything ``ticklock serve`` runs, wired together. ``start`` / ``stop`` for tests and benchmarks."""

    settings: Settings
    clock: Clock = field(default_factory=SystemClock)
    registry: Registry | None = None
    placement: Placement = STAY  # where handler code runs, apart from the engine (``place_engine``)

    def __post_init__(self) -> None:
        s = self.settings
        self.plugins = Plugins(s)
        self.registry = self.registry or self.plugins.registry()
        self.owner = s.effective_owner
        self.metrics = build_metrics(s, self.owner)
        self.store = build_store(s, self.metrics)
        self.publisher = build_publisher(s, self.metrics)
        self.runner = build_runner(
            s,
            store=self.store,
            locker=(locker := build_locker(s, self.clock)),
            publisher=self.publisher,
            metrics=self.metrics,
            registry=self.registry,
            clock=self.clock,
            owner=self.owner,
            inline=True,
            placement=self.placement,
        )
        self.locker = locker
        self.invoker = self.runner.invoker
        self.pool = WorkerPool(
            self.runner.run,
            workers=s.workers,
            queue_size=s.effective_queue_size,
            run_many=self.runner.run_many,
            batchable=self.runner.batchable,
            finish_deferred=self.runner.finish_deferred,
            caller_runs=True,  # the dispatcher runs a hand-over of a few quick fires itself: no wake-ups
            # and one of more than a batch, up to CALLER_BATCH, whose fires should end within its resolution
            # (a quarter of the relief's bound at most), each counted at its handler's run or at the pace of
            # the dispatcher's own hand-overs, the longer (a Redis lock's round trips count there)
            caller_batch=CALLER_BATCH,
            caller_budget=min(s.dispatch_resolution, RELIEVE_AFTER / 4),
            expected=self.runner.expected_seconds,
            take_stalled=self.runner.take_stalled,  # a batch held up by a run that hangs: the rest goes on
        )
        self.invoker.on_stuck = self.pool.stuck  # a worker held by a handler past its deadline is replaced
        self.pool.on_relieve = self._relieve  # and a dispatcher held up running quick fires, at once
        self.metrics.queue_depth.set_function(self.pool.depth)
        # hand-overs of a batch at most, under a load dense enough to fill one sooner than the resolution
        self.dispatcher = build_dispatcher(
            s,
            store=self.store,
            queue=self.pool,
            clock=self.clock,
            metrics=self.metrics,
            owner=self.owner,
            hand_over=BATCH,
        )
        self.service = build_service(s, self.store, self.registry, self.clock)
        self.app = local_app(
            ApiDeps(self.service, self.metrics.render, self.plugins.health_checks(), dashboard=True),
            api_token=s.api_token,
            max_body_bytes=s.max_payload_bytes + 16 * 1024,
            threads=s.api_threads,
            max_in_flight=s.api_max_in_flight,
            body_timeout=s.api_body_timeout,
        )
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._dispatching: threading.Thread | None = None  # the thread that dispatches now (``_relieve``)
        self._relieving = threading.Lock()
        self._stopped = False

    def start(self) -> None:
        """Start dispatching and housekeeping in background threads."""
        self.plugins.warn_deprecated()
        self.plugins.seed(self.service)
        self._start_dispatching()
        loops = [
            ("ticklock-housekeeping", self._housekeep),
            ("ticklock-fire-summary", self._summarise),
        ]
        if isinstance(self.metrics, PushgatewayMetrics):
            loops.append(("ticklock-metrics-push", self._push_metrics))
        for name, target in loops:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def begin_stop(self) -> None:
        """Stop claiming new work now (called from the signal handler)."""
        self._stop.set()

    def stop(self) -> None:
        """The orderly shutdown described in the module docstring."""
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        self.pool.close_intake()  # a hand-over blocked on a full queue ends now: its fire is given back
        self._join_dispatcher()
        for thread in self._threads:
            thread.join(timeout=10)
        unstarted = [*self.dispatcher.take_pending(), *self.pool.drain_unstarted()]
        self.dispatcher.give_back(unstarted)
        grace = self.settings.shutdown_grace
        log.info("shutdown.draining", extra={"released": len(unstarted), "running": self.pool.busy(), "grace": grace})
        stopped = self.pool.stop(grace)
        if not stopped:
            log.warning("shutdown.cutting_off", extra={"running": self.pool.busy()})
            self.runner.shutdown.set()
            self.invoker.interrupt_all()
            stopped = self.pool.stop(10.0)
        self.runner.finish_deferred()  # each worker wrote what waited as it left; whatever is left, now
        self.invoker.close()
        if stopped:  # every run has let its lock go; else a run still going may be releasing its lock now
            self.locker.close()
        self.app.close()
        self.runner.tally.flush()
        self.publisher.flush(5.0)
        if self.runner.alerts is not None:
            self.runner.alerts.flush(5.0)
            self.runner.alerts.close()
        # the last counts reach the Pushgateway; the group is left for scrapers and deleted once stale
        self.metrics.flush()
        self.store.close()
        log.info("shutdown.done")

    def serve(self) -> None:
        """Run until SIGTERM/SIGINT, then shut down in order."""
        s = self.settings
        host = s.host
        if not s.api_token:
            if host not in ("127.0.0.1", "localhost", "::1"):
                log.warning(
                    "api.loopback_only", extra={"requested_host": host, "reason": "no TICKLOCK_API_TOKEN is set"}
                )
            else:
                log.info("api.loopback_only", extra={"reason": "no TICKLOCK_API_TOKEN is set"})
            host = "127.0.0.1"
        config = http_server.config(self.app, host=host, port=s.port, settings=s)
        server = _Server(config, on_exit=self.begin_stop)
        _settle_heap()  # here, not in start(): a test or benchmark starting many services would keep each
        self.start()
        log.info(
            "service.started",
            extra={
                "url": f"http://{host}:{s.port}",
                "store": s.store_url.split("@")[-1],
                "lock": s.lock.split("@")[-1],
                "events": s.events,
                "owner": self.owner,
                "workers": s.workers,
                "cpus": self.placement.describe(),
                "handlers": self.registry.names() if self.registry else [],
            },
        )
        try:
            server.run()
        finally:
            self.stop()

    # -- background loops ---------------------------------------------------------------------------
    def _start_dispatching(self) -> None:
        """Under ``_relieving`` once started: a dispatcher thread, from now on the one that dispatches."""
        thread = threading.Thread(target=self._dispatch, name="ticklock-dispatcher", daemon=True)
        self._dispatching = thread
        thread.start()

    def _dispatch(self) -> None:
        me = threading.current_thread()
        self.dispatcher.run(self._stop, superseded=lambda: self._dispatching is not me)

    def _relieve(self, held: threading.Thread) -> None:
        """The pool reports ``held`` running quick fires past its bound (a handler that hangs): if it is the
        dispatcher, another takes its place now, and it ends once its run is over (``superseded``)."""
        with self._relieving:
            if held is not self._dispatching or self._stop.is_set():
                return
            log.warning("dispatcher.relieved", extra={"held": held.name})
            self._start_dispatching()

    def _join_dispatcher(self) -> None:
        """Wait (up to 10 s) for the dispatcher to end its loop; not for one running fires it handed over:
        those are the running fires the shutdown's grace is for (``pool.stop``)."""
        ends = time.monotonic() + 10
        while time.monotonic() < ends:
            with self._relieving:
                thread = self._dispatching
            if thread is None or not thread.is_alive() or self.pool.running_caller(thread):
                return
            thread.join(0.05)

    def _housekeep(self) -> None:
        while not self.clock.sleep(HOUSEKEEPING_EVERY, self._stop):
            housekeep(self.settings, self.store, self.clock, self.runner)

    def _summarise(self) -> None:
        while not self.clock.sleep(FIRE_SUMMARY_EVERY, self._stop):
            self.runner.tally.flush()

    def _push_metrics(self) -> None:
        while not self.clock.sleep(self.settings.push_interval, self._stop):
            self.metrics.flush()


class CpuPlacement:
    """The engine's threads on ``engine``, handler code on ``handlers`` (``Placement``): each inline handler
    call moves its thread to ``handlers`` and back (two ``sched_setaffinity`` calls, 1.4 us on this
    project's machine), and the threads that run handlers only move there when they start. A move the OS
    refuses (the CPUs allowed changed since the start: a container's cpuset) leaves the thread where it is,
    logged once."""

    def __init__(self, engine: frozenset[int], handlers: frozenset[int]) -> None:
        self.engine = engine
        self.handlers = handlers
        self._refused = False

    # try/except, not contextlib.suppress: these run twice a fire, and a context manager costs more than the call
    def to_handlers(self) -> None:
        try:
            os.sched_setaffinity(0, self.handlers)
        except OSError as exc:
            self._refuse(exc)

    def to_engine(self) -> None:
        try:
            os.sched_setaffinity(0, self.engine)
        except OSError as exc:
            self._refuse(exc)

    def _refuse(self, exc: OSError) -> None:
        if not self._refused:  # unlocked: two threads may both log it, once each
            self._refused = True
            log.warning("cpus.move_refused", extra={"error": str(exc), **self.describe()})

    def describe(self) -> dict[str, list[int]]:
        return {"engine": sorted(self.engine), "handlers": sorted(self.handlers)}


_held_cpus: list[int] = []  # the open lock files of the engine's CPUs (``_free_cpu``): held until the process ends


def _free_cpu(allowed: frozenset[int], owner: str, lock_dir: str) -> int | None:
    """A CPU of ``allowed`` no other ``ticklock serve`` on this machine keeps its engine to, now held: each
    holds ``ticklock-engine-cpu-N.lock`` in ``lock_dir`` (flock, released however the process ends) from
    here on. The search starts at a CPU ``owner`` picks, so that processes not sharing ``lock_dir`` (two
    containers on one machine) spread at random. None if every one is held."""
    cpus = sorted(allowed)
    first = zlib.crc32(owner.encode()) % len(cpus)
    for cpu in cpus[first:] + cpus[:first]:
        path = os.path.join(lock_dir, f"ticklock-engine-cpu-{cpu}.lock")
        try:  # opened for reading (another user's file will do), created only if missing: a sticky /tmp
            # refuses O_CREAT on a file another user owns (fs.protected_regular)
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
        except OSError:  # no such directory, or a file this user may not read: not one to take
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        _held_cpus.append(fd)
        return cpu
    return None


def place_engine(cpus: Cpus, owner: str, lock_dir: str | None = None) -> Placement:
    """Keep this process's threads, and every thread started from them from now on (they inherit it), to
    the engine's CPUs (TICKLOCK_CPUS), and return the placement that gives handler code every CPU the
    process may use: called by ``ticklock serve`` before the service starts any thread of its own (a test
    starting services in its own process keeps its CPUs). ``auto``: one CPU no other serve here holds
    (``_free_cpu``); none when every one is held, when the process may use one CPU only, when the OS
    refuses (a sandbox) or off Linux, each logged as ``cpus.unpinned`` with its reason. ``any``: nothing is
    kept. Linux sets a CPU affinity per thread, so every thread there is is set, again until no new one has
    appeared. README, "Configuration". Raises ``ConfigError`` if this process may not run on one of the
    CPUs named, or may not be kept to them."""
    if cpus == "any":
        return STAY
    linux = sys.platform == "linux" and hasattr(os, "sched_setaffinity")
    allowed = frozenset(os.sched_getaffinity(0)) if linux else frozenset()
    if cpus == "auto":
        if not linux or len(allowed) < 2:
            log.info("cpus.unpinned", extra={"reason": "one CPU" if linux else "not Linux", "cpus": sorted(allowed)})
            return STAY
        cpu = _free_cpu(allowed, owner, tempfile.gettempdir() if lock_dir is None else lock_dir)
        if cpu is None:
            reason = "every CPU keeps another serve's engine"
            log.info("cpus.unpinned", extra={"reason": reason, "cpus": sorted(allowed)})
            return STAY
        engine = frozenset({cpu})
    else:
        refused = sorted(set(cpus) - allowed)
        if refused:
            raise ConfigError(
                f"TICKLOCK_CPUS (--cpus): CPU {refused[0]} is not one this process may run on "
                f"(it may run on {','.join(map(str, sorted(allowed))) or 'none it can set: Linux only'})"
            )
        engine = frozenset(cpus)
        if engine == allowed:
            return STAY
    try:
        _keep_threads_to(engine)
    except OSError as exc:  # a sandbox that refuses, or the CPUs allowed changed since (a container's cpuset)
        if cpus != "auto":
            raise ConfigError(f"TICKLOCK_CPUS (--cpus): {exc} (TICKLOCK_CPUS=any keeps no CPUs)") from None
        with contextlib.suppress(OSError):  # no /proc to list them by: none was set
            _keep_threads_to(allowed, quiet=True)  # the threads set before the refusal go back to every CPU
        os.close(_held_cpus.pop())  # the CPU it took is free again
        log.warning("cpus.unpinned", extra={"reason": str(exc), "cpus": sorted(allowed)})
        return STAY
    return CpuPlacement(engine, allowed)


def _keep_threads_to(cpus: frozenset[int], *, quiet: bool = False) -> None:
    done: set[str] = set()
    while todo := set(os.listdir("/proc/self/task")) - done:
        for task in todo:
            try:
                os.sched_setaffinity(int(task), cpus)
            except ProcessLookupError:  # a thread that ended since the listing
                pass
            except OSError:
                if not quiet:
                    raise
        done |= todo


def _settle_heap() -> None:
    """Move what start-up made (modules, models, the wiring: objects that live as long as the process) out
    of the cyclic collector's reach. Each full collection walked all of them with the GIL held, a pause of
    ~25 ms every few seconds under load in which no fire started. Once per process: what is frozen is
    never collected (the service's own cycles included), which is right for ``serve`` only."""
    gc.collect()
    gc.freeze()


class _Server(uvicorn.Server):
    """uvicorn, telling the service the moment a signal arrives (before connections drain).

    uvicorn re-raises a captured signal once it has stopped, which would kill the process before the
    orderly shutdown runs; the list is cleared so that ``serve`` returns instead. A second signal during
    the shutdown meets the default handler and ends the process at once.
    """

    def __init__(self, config: uvicorn.Config, on_exit: Any) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: Any) -> None:
        self._on_exit()
        super().handle_exit(sig, frame)
        self._captured_signals.clear()
