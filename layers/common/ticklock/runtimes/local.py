"""The local service: ``ticklock serve``. One process runs the dispatcher, the worker pool, the API and
``/metrics`` on the embedded SQLite store.

Shutdown (SIGTERM or SIGINT): dispatching stops at once; fires claimed but not started go back to the
store (due again); running fires get ``shutdown_grace`` seconds to finish; any still running after that
are cut off, recorded as ``interrupted`` and released, so the next claim - by this service after a
restart, or by another replica - resumes them. Nothing claimed is lost.
"""

from __future__ import annotations

import gc
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from ticklock.adapters.metrics.pushgateway import PushgatewayMetrics
from ticklock.api import server as http_server
from ticklock.api.asgi import local_app
from ticklock.api.routes import ApiDeps
from ticklock.clock import Clock, SystemClock
from ticklock.engine.pool import WorkerPool
from ticklock.engine.recovery import release_the_dead
from ticklock.engine.speeds import goes_with_others
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
from ticklock.settings import Settings

log = logging.getLogger("ticklock.service")
HOUSEKEEPING_EVERY = 60.0
FIRE_SUMMARY_EVERY = 1.0  # seconds between fires.summary lines (none while no fire runs)


@dataclass
class LocalService:
    """Everything ``ticklock serve`` runs, wired together. ``start`` / ``stop`` for tests and benchmarks."""

    settings: Settings
    clock: Clock = field(default_factory=SystemClock)
    registry: Registry | None = None

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
        )
        self.locker = locker
        self.invoker = self.runner.invoker
        # a worker takes the fires of quick handlers queued behind each other together: shared store writes
        together = goes_with_others(self.runner.speeds)
        self.pool = WorkerPool(self.runner.run_all, workers=s.workers, queue_size=s.effective_queue_size,
                               together=together)  # fmt: skip
        self.invoker.on_stuck = self.pool.stuck  # a worker held by a handler past its deadline is replaced
        self.metrics.queue_depth.set_function(self.pool.depth)
        self.dispatcher = build_dispatcher(s, store=self.store, queue=self.pool, clock=self.clock, metrics=self.metrics,
                                           owner=self.owner, heartbeat=self.runner.heartbeat)  # fmt: skip
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
        self._beating = threading.Event()  # set once no run is left: the heartbeat outlasts the drain
        self._threads: list[threading.Thread] = []
        self._stopped = False

    def start(self) -> None:
        """Start dispatching and housekeeping in background threads."""
        self.plugins.warn_deprecated()
        self.plugins.seed(self.service)
        release_the_dead(self.store, self.owner, self.clock)
        beat = threading.Thread(target=self.runner.heartbeat.run, args=(self._beating,), name="ticklock-heartbeat",
                                daemon=True)  # fmt: skip
        beat.start()
        loops = [
            ("ticklock-dispatcher", lambda: self.dispatcher.run(self._stop)),
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
        self._beating.set()
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
                "handlers": self.registry.names() if self.registry else [],
            },
        )
        try:
            server.run()
        finally:
            self.stop()

    # -- background loops ---------------------------------------------------------------------------
    def _housekeep(self) -> None:
        while not self.clock.sleep(HOUSEKEEPING_EVERY, self._stop):
            housekeep(self.settings, self.store, self.clock, self.runner)

    def _summarise(self) -> None:
        while not self.clock.sleep(FIRE_SUMMARY_EVERY, self._stop):
            self.runner.tally.flush()

    def _push_metrics(self) -> None:
        while not self.clock.sleep(self.settings.push_interval, self._stop):
            self.metrics.flush()


def _settle_heap() -> None:
    """Move what start-up made (modules, models, the wiring: objects that live as long as the process) out
    of the cyclic collector's reach. Each full collection would walk all of them with the GIL held, a pause
    in which no fire starts. Once per process: what is frozen is
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
