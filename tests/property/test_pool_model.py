"""The local worker pool with ``caller_runs``, driven by hypothesis through random hand-overs, flushes,
handlers that hang and are let go, threads reported stuck and stops, against a model of what each step
allows: every fire runs once or is handed back, never both; a caller runs only quick fires it handed over
itself, a batch at most; a caller held up is relieved once while it runs, and its handlers' next fires go
to the workers while it lasts; no fire waits unless it is behind a handler that hangs; and the pool stops
with nothing counted busy.

The dispatcher is a thread of its own here, as in ``serve``: the test hands it each step and waits for the
step to end, or for its thread to be relieved (then a new dispatcher takes the next steps, as
``LocalService`` starts one). Waits are bounded (``wait_until``): a hang fails, no step is timed.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tests.support.factories import make_job, manual_fire
from tests.support.waiting import wait_until
from ticklock.adapters.queue.local import WorkerPool
from ticklock.domain.jobs import Fire
from ticklock.errors import QueueUnavailable

BATCH = 3  # small, so that hand-overs spill into the queue as often as they are held
WORKERS = 4  # at most two handlers hang at once (below): two workers or more are always free
HANDLERS = ("quick-a", "quick-b", "slow")  # quick ones are batchable (run together, or by the caller)
PATIENCE = 10.0  # seconds before a wait counts as a hang


class Dispatcher:
    """A thread that runs the steps it is handed, one at a time, as the service's dispatcher would."""

    def __init__(self, name: str) -> None:
        self.steps: queue.Queue[Callable[[], object] | None] = queue.Queue()
        self.finished = 0  # steps done
        self.errors: list[BaseException] = []
        self.retired = False  # relieved: it ends after its step, as a superseded dispatcher returns
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while (step := self.steps.get()) is not None:
            try:
                step()
            except BaseException as exc:  # noqa: BLE001 - reported to the test, which fails on it
                self.errors.append(exc)
            self.finished += 1
            if self.retired:
                return


@dataclass
class Given:
    """A fire as the model sees it."""

    fire: Fire
    handler: str
    by: Dispatcher
    gate: threading.Event | None  # set: the handler returns; None: it returns at once
    not_on_caller: bool = False  # handed over while a relieved run of its handler lasted
    started: list[threading.Thread] = field(default_factory=list)
    returned: int = 0  # handed back (refused, or drained unstarted)


class PoolModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.mutex = threading.Lock()
        self.given: dict[str, Given] = {}
        self.order: list[str] = []
        self.batches: list[list[str]] = []  # every run: the fires it was given, in order
        self.caller_batches: list[tuple[threading.Thread, list[str], bool]] = []
        self.relieved: list[tuple[threading.Thread, bool, set[str]]] = []  # thread, in its flush then, handlers
        self.flushing: set[threading.Thread] = set()
        self.reported: set[threading.Thread] = set()
        self.dispatchers: list[Dispatcher] = []
        self.unflushed: list[str] = []  # handed over since the current dispatcher's last flush
        self.hand_overs: list[list[str]] = []  # the fires each flush ended a hand-over of, in order
        self.stopping = False
        self.pool = WorkerPool(
            self._run, workers=WORKERS, queue_size=64, run_many=self._run_many, batch=BATCH,
            batchable=lambda f: f.job.handler != "slow", caller_runs=True, relieve_after=0.02,
        )  # fmt: skip
        self.pool.on_relieve = self._relieve
        self.current = self._new_dispatcher()

    # -- the pool's side ------------------------------------------------------------------------------
    def _new_dispatcher(self) -> Dispatcher:
        dispatcher = Dispatcher(f"dispatcher-{len(self.dispatchers)}")
        self.dispatchers.append(dispatcher)
        return dispatcher

    def _relieve(self, thread: threading.Thread) -> None:
        """``on_relieve``, as LocalService's: the held-up dispatcher is replaced by a new one."""
        with self.mutex:
            [*_, (_, running, _)] = [batch for batch in self.caller_batches if batch[0] is thread]  # its run's
            handlers = {self.given[name].handler for name in running}
            self.relieved.append((thread, thread in self.flushing, handlers))
            [held_up] = [d for d in self.dispatchers if d.thread is thread]
            held_up.retired = True
            self.current = self._new_dispatcher()

    def _run(self, fire: Fire) -> None:
        self._ran([fire], defer=False)

    def _run_many(self, fires: list[Fire], *, defer: bool) -> None:
        self._ran(fires, defer=defer)

    def _ran(self, fires: list[Fire], *, defer: bool) -> None:
        me = threading.current_thread()
        names = [f.job.name for f in fires]
        with self.mutex:
            self.batches.append(names)
            if any(d.thread is me for d in self.dispatchers):
                self.caller_batches.append((me, names, defer))
        for name in names:
            given = self.given[name]
            with self.mutex:
                given.started.append(me)
            if given.gate is not None:
                given.gate.wait(PATIENCE * 3)

    # -- steps --------------------------------------------------------------------------------------------
    def _on_dispatcher(self, step: Callable[[], object]) -> None:
        """Hand ``step`` to the dispatcher; back when it ends, or once its thread is relieved meanwhile."""
        dispatcher = self.current
        done = dispatcher.finished + 1
        dispatcher.steps.put(step)
        assert wait_until(lambda: dispatcher.finished >= done or dispatcher.retired, PATIENCE), (
            "a dispatcher's step hangs and it was not relieved"
        )
        assert dispatcher.errors == []

    def _closed_gates(self) -> int:
        return sum(1 for g in self.given.values() if g.gate is not None and not g.gate.is_set())

    @rule(
        fires=st.lists(st.tuples(st.sampled_from(HANDLERS), st.booleans()), min_size=1, max_size=6),
        flush=st.booleans(),
    )
    def hand_over(self, fires: list[tuple[str, bool]], flush: bool) -> None:
        """The dispatcher hands over the fires due (each of a handler, and hanging or not), and flushes."""
        for handler, hangs in fires:
            self._submit(handler, hangs=hangs and self._closed_gates() < 2)
        if flush:
            self.flush()

    def _submit(self, handler: str, *, hangs: bool) -> None:
        name = f"f{len(self.order)}"
        given = Given(manual_fire_of(name, handler), handler, self.current, threading.Event() if hangs else None)
        with self.mutex:
            # a relieved run whose handler still hangs: that handler's fires are the workers' meanwhile
            given.not_on_caller = any(
                handler in handlers and self._hangs(thread) for thread, _, handlers in self.relieved
            )
            self.given[name] = given
        self.order.append(name)
        stopping = self.stopping

        def submit() -> None:
            try:
                self.pool.submit(given.fire)
            except QueueUnavailable as refused:
                assert stopping, "refused while the pool takes fires"
                for each in refused.fires:
                    self.given[each.job.name].returned += 1
                self.unflushed.clear()

        self._on_dispatcher(submit)
        if not self.current.retired:
            self.unflushed.append(name)

    def _hangs(self, thread: threading.Thread) -> bool:
        """Under ``mutex``: ``thread`` is in a fire whose gate is closed (its run cannot have ended)."""
        return any(
            g.started[:1] == [thread] and g.gate is not None and not g.gate.is_set() for g in self.given.values()
        )

    def flush(self) -> None:
        dispatcher, flushed, self.unflushed = self.current, self.unflushed, []
        stopping = self.stopping
        self.hand_overs.append(flushed)

        def flush() -> None:
            with self.mutex:
                self.flushing.add(dispatcher.thread)
            try:
                self.pool.flush()
            except QueueUnavailable as refused:
                assert stopping, "refused while the pool takes fires"
                for each in refused.fires:
                    self.given[each.job.name].returned += 1
            finally:
                with self.mutex:
                    self.flushing.discard(dispatcher.thread)

        self._on_dispatcher(flush)
        # no fire handed over waits, unless it is behind a handler that hangs (in a batch run, or in the
        # run that hangs itself) or was handed back
        assert wait_until(lambda: not self._waiting(flushed), PATIENCE), f"waiting: {self._waiting(flushed)}"

    def _waiting(self, names: list[str]) -> list[str]:
        with self.mutex:
            batches = [list(b) for b in self.batches]
            closed = {n for n, g in self.given.items() if g.gate is not None and not g.gate.is_set()}
            return [
                name
                for name in names
                if not self.given[name].started
                and not self.given[name].returned
                and not any(name in b and any(n in closed for n in b[: b.index(name)]) for b in batches)
            ]

    @precondition(lambda self: self._closed_gates() > 0)
    @rule(data=st.data())
    def let_a_handler_return(self, data: st.DataObject) -> None:
        closed = [n for n in self.order if (g := self.given[n].gate) is not None and not g.is_set()]
        name = data.draw(st.sampled_from(closed))
        self.given[name].gate.set()  # type: ignore[union-attr]
        # the fires behind it go on (each step ends on a settled state: what the next one may do is known)
        flushed = [name for names in self.hand_overs for name in names]
        assert wait_until(lambda: not self._waiting(flushed), PATIENCE), f"waiting: {self._waiting(flushed)}"

    def _hung_unreported(self) -> list[str]:
        """The fires started whose handler hangs, on a thread not reported stuck yet."""
        with self.mutex:
            return [
                name
                for name in self.order
                if (given := self.given[name]).started
                and given.gate is not None
                and not given.gate.is_set()
                and given.started[0] not in self.reported
            ]

    @rule(pick=st.integers(0, 3))
    def report_stuck(self, pick: int) -> None:
        """The invoker's watchdog gave up a handler past its deadline: its thread is reported. (Which fires
        have started behind a hung one depends on how the workers took them: drawn apart from it.)"""
        hung = self._hung_unreported()
        if not hung:
            return
        thread = self.given[hung[pick % len(hung)]].started[0]
        self.reported.add(thread)
        self.pool.stuck(thread)

    @precondition(lambda self: not self.stopping and len(self.order) >= 12)
    @rule()
    def drain(self) -> None:
        """A stop's first step: what is not started is handed back; later hand-overs are refused."""
        self.stopping = True
        result: list[Fire] = []
        self._on_dispatcher(lambda: result.extend(self.pool.drain_unstarted()))
        for each in result:
            self.given[each.job.name].returned += 1
        self.unflushed.clear()

    # -- what holds after every step --------------------------------------------------------------------------
    @invariant()
    def no_fire_runs_twice_or_both_runs_and_comes_back(self) -> None:
        with self.mutex:
            for name, given in self.given.items():
                assert len(given.started) + given.returned <= 1, (name, given.started, given.returned)

    @invariant()
    def a_caller_runs_only_a_batch_of_quick_fires_it_handed_over_itself(self) -> None:
        with self.mutex:
            for thread, names, defer in self.caller_batches:
                assert not defer and 1 <= len(names) <= BATCH
                for name in names:
                    given = self.given[name]
                    assert given.by.thread is thread and given.handler != "slow", (name, thread.name)
                    assert not given.not_on_caller, f"{name} ran on a caller while its handler's run was relieved"

    @invariant()
    def a_caller_runs_a_whole_hand_over_or_none_of_it(self) -> None:
        # once a hand-over put a fire in the queue, its later fires follow it there (no overtaking)
        with self.mutex:
            for _, names, _ in self.caller_batches:
                assert names in self.hand_overs, names

    @invariant()
    def a_caller_is_relieved_once_and_only_in_its_run(self) -> None:
        with self.mutex:
            threads = [thread for thread, _, _ in self.relieved]
            assert len(threads) == len(set(threads))
            assert all(in_flush for _, in_flush, _ in self.relieved)

    @invariant()
    def busy_never_goes_below_zero(self) -> None:
        assert self.pool.busy() >= 0

    def teardown(self) -> None:
        event(f"relieved: {min(len(self.relieved), 2)}")
        event(f"caller batches: {min(len(self.caller_batches), 3)}")
        event(f"fires kept off a relieved caller: {min(sum(g.not_on_caller for g in self.given.values()), 2)}")
        event(f"threads reported stuck: {min(len(self.reported), 2)}")
        event(f"stopping: {self.stopping}")
        try:
            if self.unflushed and not self.current.retired:
                self.flush()
            for given in self.given.values():
                if given.gate is not None:
                    given.gate.set()
            assert wait_until(lambda: all(g.started or g.returned for g in self.given.values()), PATIENCE), (
                "fires neither run nor handed back"
            )
            assert self.pool.stop(PATIENCE)
            assert wait_until(lambda: self.pool.busy() == 0, PATIENCE)
            self.no_fire_runs_twice_or_both_runs_and_comes_back()
        finally:
            for given in self.given.values():
                if given.gate is not None:
                    given.gate.set()
            self.pool.stop(1)
            for dispatcher in self.dispatchers:
                dispatcher.steps.put(None)
            for dispatcher in self.dispatchers:
                dispatcher.thread.join(PATIENCE)
                assert not dispatcher.thread.is_alive()
                assert dispatcher.errors == []


def manual_fire_of(name: str, handler: str) -> Fire:
    job = make_job(name=name, handler=handler)
    assert job.next_run_at is not None
    return manual_fire(job, job.next_run_at)


# POOL_MODEL_EXAMPLES: a longer search than the suite's after a change to the pool (with --timeout=0)
PoolModel.TestCase.settings = settings(
    max_examples=int(os.environ.get("POOL_MODEL_EXAMPLES", "60")),
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_the_pool_against_its_model = PoolModel.TestCase
