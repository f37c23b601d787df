"""The local worker pool with ``caller_runs``, driven by hypothesis through random hand-overs, flushes,
handlers that hang and are let go, every worker held up at once, threads reported stuck, intake closed,
drains and stops, against a model of what each step allows: every fire runs once or is handed back, never
both; a caller runs only a whole hand-over of its own quick fires, never while fires are queued, and does
run one whenever the model says it must; a caller held up is relieved once during its flush, and its
handlers' next fires go to the workers while it hangs; the rest of a batch held up by a handler that hangs
goes on on a thread of its own (``take_stalled``, here a model of the runner's); no fire waits unless
every worker hangs, or it is behind a handler that hangs while the pool hands over no rest (it stops
taking fires, or ``workers`` rests run); busy counts the threads that hang; and the pool stops with
nothing counted busy.

The dispatcher is a thread of its own here, as in ``serve``: the test hands it each step and waits for the
step to end, or for its thread to be relieved (then a new dispatcher takes the next steps, as
``LocalService`` starts one). Waits are bounded (``wait_until``): a hang fails, no step is timed.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Sequence
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
# past a batch, a caller keeps a hand-over of quick fires up to CALLER_BATCH while their expected runs
# (EXPECTED, by handler; sums exact in binary) add up to BUDGET at most: any 4 quick fires fit, 5 fit
# with at most 3 quick-b among them, 6 are past the cap
CALLER_BATCH, BUDGET = 5, 1.0
EXPECTED = {"quick-a": 0.125, "quick-b": 0.25}
WORKERS = 4
MOST_HUNG = WORKERS + 1  # handlers that hang at once, at most: every worker's and a dispatcher's
# handlers drawn for the fires, the quick ones (batchable: run together, or by the caller) twice as often,
# so that hand-overs of quick fires alone come often
HANDLERS = ("quick-a", "quick-a", "quick-b", "quick-b", "slow")
PATIENCE = 10.0  # seconds before a wait counts as a hang


def callers(handlers: Sequence[str]) -> bool:
    """Whether a hand-over of quick fires of these handlers is small enough to be the caller's: a batch,
    or past it up to CALLER_BATCH while their expected runs fit the budget."""
    return len(handlers) <= BATCH or (
        len(handlers) <= CALLER_BATCH and sum(EXPECTED[handler] for handler in handlers) <= BUDGET
    )


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
    not_on_caller: bool = False  # handed over while a relieved run of its handler hung
    started: list[threading.Thread] = field(default_factory=list)
    returned: int = 0  # handed back (refused, or drained unstarted)

    def hangs(self) -> bool:
        return self.gate is not None and not self.gate.is_set()


@dataclass
class Batch:
    """A batch a thread runs, as the runner sees it: ``names[next:]`` not begun (``take_stalled``)."""

    names: list[str]
    next: int = 0


class PoolModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.mutex = threading.Lock()
        self.errors: list[str] = []  # found on the pool's threads (where an assertion would be swallowed)
        self.given: dict[str, Given] = {}
        self.order: list[str] = []
        self.runs: list[list[str]] = []  # every run's fires (a worker's, a caller's; a batch or one)
        self.caller_batches: list[tuple[threading.Thread, list[str], bool]] = []
        self.relieved: list[tuple[threading.Thread, set[str]]] = []  # each relieved thread, its run's handlers
        self.flushing: dict[threading.Thread, list[str]] = {}  # a dispatcher in its flush: that hand-over
        self.reported: set[threading.Thread] = set()
        self.dispatchers: list[Dispatcher] = []
        self.unflushed: list[str] = []  # handed over since the current dispatcher's last flush
        self.hand_overs: list[list[str]] = []  # the fires each flush ended a hand-over of, in order
        self.closed = self.drained = self.stopped = False
        self.unreplaced = 0  # workers reported stuck once the intake closed: no longer replaced
        self.batches: dict[threading.Thread, Batch] = {}  # the batches being run, by thread
        self.rests: list[threading.Thread] = []  # threads a batch's rest was handed to
        self.pool = WorkerPool(
            self._run, workers=WORKERS, queue_size=256, run_many=self._run_many, batch=BATCH,
            batchable=lambda f: f.job.handler != "slow", caller_runs=True, relieve_after=0.02,
            take_stalled=self._take_stalled, caller_batch=CALLER_BATCH, caller_budget=BUDGET,
            expected=lambda f: EXPECTED[f.job.handler],
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
            if thread not in self.flushing:
                self.errors.append(f"{thread.name} relieved outside its flush")
                return
            self.relieved.append((thread, {self.given[name].handler for name in self.flushing[thread]}))
            held_up = [d for d in self.dispatchers if d.thread is thread]
            if len(held_up) != 1 or held_up[0].retired:
                self.errors.append(f"{thread.name} relieved, but is not a dispatcher at work")
                return
            held_up[0].retired = True
            self.current = self._new_dispatcher()

    def _run(self, fire: Fire) -> None:
        self._ran([fire], many=False, defer=False)

    def _run_many(self, fires: list[Fire], *, defer: bool) -> None:
        self._ran(fires, many=True, defer=defer)

    def _ran(self, fires: list[Fire], *, many: bool, defer: bool) -> None:
        me = threading.current_thread()
        names = [f.job.name for f in fires]
        with self.mutex:
            # a worker's batch is a batch at most; a caller's (or the rest of one) may be its own hand-over
            most = BATCH if me.name.startswith("ticklock-worker") else CALLER_BATCH
            if many and not (
                len(names) <= most
                and all(self.given[n].handler != "slow" for n in names)
                and names == sorted(names, key=self.order.index)
            ):
                self.errors.append(f"a batch of slow fires, of more than {most} or out of order: {names}")
            self.runs.append(names)
            if any(d.thread is me for d in self.dispatchers):
                self.caller_batches.append((me, names, defer))
                if self.pool.depth():  # fires held only while none are queued, and a spill queues them all
                    self.errors.append(f"{me.name} runs {names} with fires queued")
        batch = Batch(list(names))
        with self.mutex:
            if many:
                self.batches[me] = batch
        try:
            while True:
                with self.mutex:
                    if batch.next >= len(batch.names):
                        break
                    given = self.given[batch.names[batch.next]]
                    batch.next += 1
                    given.started.append(me)
                if given.gate is not None:
                    given.gate.wait()  # teardown opens every gate
        finally:
            with self.mutex:
                if self.batches.get(me) is batch:
                    del self.batches[me]

    def _take_stalled(self, after: float, most: int) -> list[Callable[[], object]]:
        """The runner's ``take_stalled``: the rest of each batch whose current fire hangs, up to ``most``."""
        rests: list[Callable[[], object]] = []
        with self.mutex:
            if after != 0.02 or most < 1:
                self.errors.append(f"take_stalled({after}, {most}): not the pool's bound, or asked with no room")
            for batch in self.batches.values():
                if len(rests) >= most:
                    break
                if batch.next < len(batch.names) and self.given[batch.names[batch.next - 1]].hangs():
                    rest = [self.given[name].fire for name in batch.names[batch.next :]]
                    del batch.names[batch.next :]
                    rests.append(lambda rest=rest: self._rest(rest))  # type: ignore[misc]
        return rests

    def _rest(self, fires: list[Fire]) -> None:
        """A batch's rest, on the thread the pool gave it: run as a batch of its own (so taken apart too)."""
        me = threading.current_thread()
        with self.mutex:
            self.rests.append(me)
            if any(d.thread is me for d in self.dispatchers) or me.name.startswith("ticklock-worker"):
                self.errors.append(f"a batch's rest runs on {me.name}")
        self._ran(fires, many=True, defer=False)

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
        return sum(1 for g in self.given.values() if g.hangs())

    @rule(
        fires=st.lists(st.tuples(st.sampled_from(HANDLERS), st.booleans()), min_size=1, max_size=6),
        flush=st.sampled_from([True, True, True, False]),  # a flush left out: the next hand-over is the same one
    )
    def hand_over(self, fires: list[tuple[str, bool]], flush: bool) -> None:
        """The dispatcher hands over the fires due (each of a handler, and hanging or not), and flushes."""
        self._hand_over(fires, flush=flush)

    def _hand_over(self, fires: list[tuple[str, bool]], *, flush: bool) -> None:
        # when nothing hangs, was queued or held before, and the pool takes fires, a flushed hand-over of a
        # batch of quick fires at most, or past it within the cap and the budget, is the dispatcher's own
        # (settled: relieved dispatchers have ended)
        mine = (
            flush
            and not self.closed
            and not self.unflushed
            and self._closed_gates() == 0
            and all(handler != "slow" for handler, _ in fires)
            and callers([handler for handler, _ in fires])
            and wait_until(lambda: all(not d.thread.is_alive() for d in self.dispatchers if d.retired), PATIENCE)
        )
        dispatcher, first = self.current, len(self.order)
        for handler, hangs in fires:
            self._submit(handler, hangs=hangs and self._closed_gates() < MOST_HUNG)
        if flush:
            self.flush()
        if mine:
            names = self.order[first:]
            assert (dispatcher.thread, names, False) in self.caller_batches, f"{names} not run by the dispatcher"

    @rule(
        handlers=st.lists(st.sampled_from(("quick-a", "quick-b")), min_size=BATCH + 1, max_size=CALLER_BATCH + 1),
        hangs=st.booleans(),
    )
    def hand_over_past_a_batch(self, handlers: list[str], hangs: bool) -> None:
        """A hand-over of quick fires past a batch (its first hanging or not): the dispatcher's own within
        the cap and the budget, else the workers'."""
        self._hand_over([(handler, hangs and i == 0) for i, handler in enumerate(handlers)], flush=True)

    @precondition(lambda self: self._closed_gates() == 0)
    @rule()
    def occupy_every_worker(self) -> None:
        """A hand-over of a slow fire for each worker, each hanging, and one more: it waits in the queue, and
        so does what comes next."""
        for _ in range(WORKERS):
            self._submit("slow", hangs=True)
        self._submit("slow", hangs=False)
        self.flush()

    @precondition(lambda self: self._closed_gates() == 0 and not self.closed)
    @rule()
    def hold_up_a_batch_twice(self) -> None:
        """A hand-over of more than a batch (the workers': past the caller's cap), its first two fires
        hanging: the rest of the batch they share goes on elsewhere, then the rest of that; the first is let
        go, leaving the second hanging on a thread the pool started for a rest (unless the workers took them
        apart otherwise)."""
        first = len(self.order)
        for hangs in (True, True, False, False, False, False):
            self._submit("quick-a", hangs=hangs)
        self.flush()
        self.given[self.order[first]].gate.set()  # type: ignore[union-attr]
        self._settled()

    def _submit(self, handler: str, *, hangs: bool) -> None:
        name = f"f{len(self.order)}"
        given = Given(manual_fire_of(name, handler), handler, self.current, threading.Event() if hangs else None)
        with self.mutex:
            # a relieved run that still hangs: its handlers' fires are the workers' meanwhile
            given.not_on_caller = any(handler in handlers and self._hangs(t) for t, handlers in self.relieved)
            self.given[name] = given
        self.order.append(name)
        closed = self.closed

        def submit() -> None:
            try:
                self.pool.submit(given.fire)
            except QueueUnavailable as refused:
                assert closed, "refused while the pool takes fires"
                self._handed_back(refused.fires)

        self._on_dispatcher(submit)
        self.unflushed.append(name)

    def _hangs(self, thread: threading.Thread) -> bool:
        """Under ``mutex``: ``thread`` is in a fire whose gate is closed (its run cannot have ended)."""
        return any(g.started[:1] == [thread] and g.hangs() for g in self.given.values())

    def flush(self) -> None:
        dispatcher, flushed, self.unflushed = self.current, self.unflushed, []
        closed = self.closed
        self.hand_overs.append(flushed)

        def step() -> None:
            with self.mutex:
                self.flushing[dispatcher.thread] = flushed
            try:
                self.pool.flush()
            except QueueUnavailable as refused:
                assert closed, "refused while the pool takes fires"
                self._handed_back(refused.fires)
            finally:
                with self.mutex:
                    del self.flushing[dispatcher.thread]

        self._on_dispatcher(step)
        self._settled()

    def _settled(self) -> None:
        """Wait until no fire handed over waits, unless it was handed back, or every worker hangs, or it is
        behind a handler that hangs (in a batch, or the one that hangs itself) while no rest can be handed
        over; and until busy counts the threads that hang."""
        flushed = [name for names in self.hand_overs for name in names]
        assert wait_until(lambda: not self._waiting(flushed), PATIENCE), f"waiting: {self._waiting(flushed)}"
        if not self.stopped:  # a stop's workers end: busy then counts only what still runs
            assert wait_until(lambda: self.pool.busy() == self._hung_threads(), PATIENCE), (
                f"busy {self.pool.busy()}, {self._hung_threads()} threads hang"
            )

    def _hung_threads(self) -> int:
        with self.mutex:
            return len(self._hanging())

    def _hanging(self) -> set[threading.Thread]:
        """Under ``mutex``: the threads in a run that hangs, not reported stuck."""
        return {g.started[0] for g in self.given.values() if g.started and g.hangs()} - self.reported

    def _waiting(self, names: list[str]) -> list[str]:
        with self.mutex:
            if self._workers_hung() + self.unreplaced >= WORKERS:
                return []  # none is free: whatever is queued waits
            # a rest is handed over while the pool takes fires and fewer than ``workers`` rests run
            kept = self.closed or sum(1 for t in self.rests if t.is_alive()) >= WORKERS
            return [
                name
                for name in names
                if not (given := self.given[name]).started
                and not given.returned
                and not (kept and self._behind_a_hung_one(name))
            ]

    def _workers_hung(self) -> int:
        """Under ``mutex``: the workers in a run that hangs, not reported stuck."""
        return sum(1 for thread in self._hanging() if thread.name.startswith("ticklock-worker"))

    def _behind_a_hung_one(self, name: str) -> bool:
        """Under ``mutex``: ``name`` was taken in a run behind a fire that hangs (workers' runs included)."""
        return any(
            name in names and any(self.given[n].hangs() for n in names[: names.index(name)]) for names in self.runs
        )

    @precondition(lambda self: self._closed_gates() > 0)
    @rule(data=st.data())
    def let_a_handler_return(self, data: st.DataObject) -> None:
        hung = [n for n in self.order if self.given[n].hangs()]
        self.given[data.draw(st.sampled_from(hung))].gate.set()  # type: ignore[union-attr]
        self._settled()  # each step ends on a settled state: what the next one may do is known

    def _hung_unreported(self) -> list[str]:
        """The fires started whose handler hangs, on a thread not reported stuck yet."""
        with self.mutex:
            return [
                name
                for name in self.order
                if (given := self.given[name]).started and given.hangs() and given.started[0] not in self.reported
            ]

    @rule(pick=st.integers(0, 3))
    def report_stuck(self, pick: int) -> None:
        """The invoker's watchdog gave up a handler past its deadline: its thread is reported. ``pick`` is
        drawn without seeing the fires that hang, which depend on the workers' timing."""
        hung = self._hung_unreported()
        if not hung:
            return
        thread = self.given[hung[pick % len(hung)]].started[0]
        self.reported.add(thread)
        if self.closed and thread.name.startswith("ticklock-worker"):
            self.unreplaced += 1
        self.pool.stuck(thread)
        self._settled()

    @precondition(lambda self: not self.closed and len(self.order) >= 12)
    @rule()
    def close_intake(self) -> None:
        """A stop's first step (``LocalService.stop``): hand-overs from now on are refused, with what is held."""
        self.closed = True
        self.pool.close_intake()

    @precondition(lambda self: not self.drained and len(self.order) >= 12)
    @rule()
    def drain(self) -> None:
        """What a stop hands back to the store: every fire neither started nor running, in the order given."""
        self._drain()

    def _drain(self) -> None:
        self.closed = self.drained = True
        drained = self.pool.drain_unstarted()
        names = [each.job.name for each in drained]
        assert names == sorted(names, key=self.order.index)
        self._handed_back(drained)
        self.unflushed.clear()

    def _handed_back(self, fires: Sequence[Fire]) -> None:
        with self.mutex:
            for each in fires:
                self.given[each.job.name].returned += 1

    @precondition(lambda self: not self.stopped and self._closed_gates() > 0 and len(self.order) >= 12)
    @rule()
    def stop_with_handlers_hanging(self) -> None:
        """A stop (after the drain, as ``LocalService.stop``) waits for every run that hangs and was not
        reported stuck (a caller's too), then gives up."""
        if not self.drained:
            self._drain()
        self.stopped = True
        hang = bool(self._hung_threads())
        stopped = self.pool.stop(0.05)
        assert not (hang and stopped), "the pool stopped with a run still going"

    # -- what holds after every step --------------------------------------------------------------------------
    @invariant()
    def nothing_went_wrong_on_the_pools_threads(self) -> None:
        with self.mutex:
            assert self.errors == []

    @invariant()
    def no_fire_runs_twice_or_both_runs_and_comes_back(self) -> None:
        with self.mutex:
            for name, given in self.given.items():
                assert len(given.started) + given.returned <= 1, (name, given.started, given.returned)

    @invariant()
    def a_caller_runs_only_a_whole_hand_over_of_its_own_quick_fires(self) -> None:
        # once a hand-over put a fire in the queue, its later fires follow it there (no overtaking)
        with self.mutex:
            for thread, names, defer in self.caller_batches:
                handlers = [self.given[name].handler for name in names]
                assert not defer and names and callers(handlers) and names in self.hand_overs, names
                for name in names:
                    given = self.given[name]
                    assert given.by.thread is thread and given.handler != "slow", (name, thread.name)
                    assert not given.not_on_caller, f"{name} ran on a caller while its handler's relieved run hung"

    @invariant()
    def a_caller_is_relieved_once_and_runs_while_it_hangs(self) -> None:
        with self.mutex:
            threads = [thread for thread, _ in self.relieved]
            hanging = [thread for thread in threads if self._hangs(thread)]
        assert len(threads) == len(set(threads))
        assert all(self.pool.running_caller(thread) for thread in hanging)  # LocalService's joins rely on it

    @invariant()
    def busy_never_goes_below_zero(self) -> None:
        assert self.pool.busy() >= 0

    def _let_every_handler_return(self) -> None:
        for given in self.given.values():
            if given.gate is not None:
                given.gate.set()

    def teardown(self) -> None:
        event(f"relieved: {min(len(self.relieved), 2)}")
        event(f"caller batches: {min(len(self.caller_batches), 3)}")
        past = sum(len(names) > BATCH for _, names, _ in self.caller_batches)
        event(f"caller batches past a batch (within the budget): {min(past, 2)}")
        event(f"fires kept off a relieved caller: {min(sum(g.not_on_caller for g in self.given.values()), 2)}")
        event(f"threads reported stuck: {min(len(self.reported), 2)}")
        event(f"rests handed over: {min(len(self.rests), 2)}")
        event(f"closed {self.closed}, drained {self.drained}, stopped with runs hanging {self.stopped}")
        try:
            if self.unflushed and not self.current.retired:
                self.flush()
            if self.closed and not self.drained:
                self._drain()  # a stop's next step (``LocalService.stop``): the queue's fires go back
            self._let_every_handler_return()
            assert wait_until(lambda: all(g.started or g.returned for g in self.given.values()), PATIENCE), (
                "fires neither run nor handed back"
            )
            assert self.pool.stop(PATIENCE)
            assert wait_until(lambda: self.pool.busy() == 0, PATIENCE)
            self.no_fire_runs_twice_or_both_runs_and_comes_back()
            self.nothing_went_wrong_on_the_pools_threads()
        finally:
            self._let_every_handler_return()  # also after a failure: no thread is left waiting on a gate
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
