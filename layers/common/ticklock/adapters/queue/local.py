"""The local worker pool: N threads fed by a queue bounded at 2 x N (the reference's channel).

``submit`` blocks while the queue is full: the dispatcher falls behind the clock instead of growing
memory. At most ``workers + queue_size`` fires are ever held here (with ``caller_runs``, a hand-over more
(a batch, or up to ``caller_batch``) for each thread that dispatches: one, and those relieved while their
run lasts).

A worker whose sync handler outlives its deadline (run inline, ``Invoker(inline=True)``) is reported by
``stuck``: another worker starts in its place, and the stuck one ends once its handler returns. So the
pool keeps ``workers`` threads serving the queue, however many handlers hang.

``caller_runs`` (``ticklock serve``): a hand-over that is all quick fires (``batchable``, at most a batch)
into an empty queue is run by the caller itself at ``flush``, on its own thread, with no worker woken. A
spread load hands over a group of fires every few milliseconds (serve paces them to about a batch); each
such group cost three thread wake-ups (the dispatcher's, a worker's, the watcher's), a quarter of a
fire's CPU. Past a batch, up to ``caller_batch`` fires, the caller keeps a hand-over whose fires are
expected to take ``caller_budget`` seconds in all at most (serve: its dispatch resolution, at most a
quarter of ``relieve_after``: 12.5 ms at the defaults), so that it is not held up much longer than a
batch of quick fires could hold it already. A fire is expected to take the longer of its handler's
run (``expected``) and what each fire of the caller's own hand-overs took, measured on its clock (the
lock's round trips and the store's writes included: a Redis lock or a remote store counts as its fires
really run, without the wiring saying which lock it is): under 5,000 noop fires a
second at a fixed 5 ms, hand-overs of ~25 took ~180 us of CPU a fire on the workers and ~165 on the
dispatcher; a paced hand-over that comes out a little past a batch stays the caller's. The caller is
the dispatcher, so a caller's run that lasts more than ``relieve_after`` seconds (a quick handler that
hangs) is reported to ``on_relieve`` with the caller's thread, which then starts another dispatcher in
its place (``LocalService``); the fires of that run's handlers go to the workers from then on, until it ends.

``take_stalled`` (the runner's): a batch, a worker's or a caller's, whose current run has lasted
``relieve_after`` seconds is taken apart by the same watch: the rest of it (the fires not begun, the runs
ended and not yet written) goes on a thread of its own, so that no fire waits for another job's run that
hangs until that one's deadline. At most ``workers`` such threads run at once; each counts as busy, is
waited for by ``stop``, and is itself taken apart if one of its runs hangs.
"""

from __future__ import annotations

import collections
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence

from ticklock.domain.jobs import Fire
from ticklock.errors import QueueUnavailable

log = logging.getLogger("ticklock.pool")
_STOP = object()
BATCH = 16  # fires a worker takes at once, when they can run together (``run_many``)
CALLER_BATCH = 64  # fires a caller runs itself at most, when their runs are expected to fit its budget
STALL = 0.005  # seconds an item runs before its worker counts as slow (others are woken for what waits)
RELIEVE_AFTER = 0.05  # seconds a caller's own run (``caller_runs``) lasts before the caller is relieved
# seconds without a run after which the relief's watch sleeps until the next begins (told by ``_watched``):
# short, so that between bursts a second apart it sleeps rather than looks every half ``relieve_after``
RELIEF_IDLE = 0.1


class _Inbox:
    """The pool's bounded FIFO, built to run on as few threads as keep up. Under the GIL every hand-over
    between threads costs CPU: a burst of noop fires through ``queue.Queue`` and 30 workers took 5.5
    context switches a fire (none when one thread ran the same fires), about half of each fire's CPU.

    * The producer, once blocked on a full queue, is woken when half of it is free, not at every item
      taken: the dispatcher hands fires over half a queue at a time.
    * A worker is *quick* while its current item has run less than ``stall`` seconds. A worker coming
      back for an item while another is quick leaves the items to that one and waits; a quick worker
      keeps taking them. So a burst of quick fires runs on one thread at a time, without hand-overs.
    * While items wait and no running worker is quick (each is in a slow handler), the watcher wakes
      idle workers every ``stall`` seconds, as many as there are slow ones (doubling), up to the items
      waiting. A burst of slow fires (HTTP checks) is spread over the workers within a few ``stall``.
    """

    def __init__(self, maxsize: int, *, stall: float = STALL, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.maxsize = maxsize
        self._monotonic = monotonic
        self._low = maxsize // 2
        self._stall = stall
        self._items: collections.deque[object] = collections.deque()
        self._mutex = threading.Lock()
        self._not_empty = threading.Condition(self._mutex)
        self._not_full = threading.Condition(self._mutex)
        self._stalled = threading.Condition(self._mutex)
        self._since: dict[int, float] = {}  # running workers (thread ident): when each took its item
        self._waiting = 0  # workers waiting for an item
        self._waking = 0  # of those, woken and not yet back: they count as coming for the items
        self._closed = False
        self.refusing = False  # the producer's items are refused (the pool is stopping); set by ``refuse``
        threading.Thread(target=self._watch, name="ticklock-pool-watch", daemon=True).start()

    def put(self, item: object, *, bounded: bool = True) -> None:
        """Append ``item``; ``bounded`` (the producer's items): wait while the queue is full, and raise
        ``_Refused`` once ``refuse`` was called, waiting or not (a stop's own items are not bounded)."""
        with self._mutex:
            while bounded and len(self._items) >= self.maxsize and not self.refusing:
                self._not_full.wait()
            if bounded and self.refusing:
                raise _Refused
            self._items.append(item)
            if not bounded or not (self._since or self._waking):  # a stop, or nobody runs or is coming
                self._wake(1)
            elif self._waiting:
                self._stalled.notify()  # left to the running workers; the watcher sees that they take it

    def get(self, *, done: bool) -> object:
        """The next item, waiting for one; ``done``: the caller has finished the item it took before."""
        me = threading.get_ident()
        with self._mutex:
            if done:
                self._since.pop(me, None)
            while not self._items or self._quick_other(me):
                if self._items:
                    self._stalled.notify()  # items wait for a quick worker: the watcher sees that it takes them
                self._waiting += 1
                try:
                    self._not_empty.wait()
                finally:
                    self._waiting -= 1
                    self._waking = max(0, self._waking - 1)
                if self._items and self._items[0] is _STOP:
                    break  # shutting down: every worker takes its stop
            self._since[me] = self._monotonic()
            return self._taken_one()

    def _quick_other(self, me: int | None = None) -> bool:
        """Under ``_mutex``: whether a worker (other than ``me``) runs an item it took under ``stall`` ago."""
        if not self._since:
            return False
        recent = self._monotonic() - self._stall
        return any(since > recent for ident, since in self._since.items() if ident != me)

    def take_more(self, fits: Callable[[Fire], bool], most: int) -> list[Fire]:
        """For a worker running an item it took: the items at the head that ``fits``, up to ``most``."""
        taken: list[Fire] = []
        with self._mutex:
            while self._items and len(taken) < most:
                head = self._items[0]
                if not isinstance(head, Fire) or not fits(head):
                    break
                taken.append(head)
                self._taken_one()
        return taken

    def get_nowait(self) -> object:
        """The next item, or ``_EMPTY`` (for a caller that is not a worker)."""
        with self._mutex:
            return self._taken_one() if self._items else _EMPTY

    def _taken_one(self) -> object:
        item = self._items.popleft()
        if len(self._items) <= self._low:
            self._not_full.notify()  # a no-op unless the producer waits: it does, once, at the low mark
        return item

    def left(self, thread: threading.Thread) -> None:
        """A running worker will not come back (stuck in a handler, replaced): it no longer counts."""
        with self._mutex:
            if thread.ident is not None:
                self._since.pop(thread.ident, None)
            if self._items and self._waiting:
                self._stalled.notify()

    def refuse(self) -> None:
        """Take no more of the producer's items: a ``put`` waiting for room raises now, and every one after."""
        with self._mutex:
            self.refusing = True
            self._not_full.notify_all()

    def close(self) -> None:
        with self._mutex:
            self._closed = True
            self._stalled.notify()

    def qsize(self) -> int:
        return len(self._items)

    def _watch(self) -> None:
        with self._mutex:
            while not self._closed:
                if not (self._items and self._waiting):
                    self._stalled.wait()
                    continue
                self._stalled.wait(self._stall)
                if not (self._items and self._waiting) or self._waking:
                    continue
                if self._quick_other():
                    continue  # a quick worker is taking the items
                slow = len(self._since)
                self._wake(min(len(self._items), self._waiting, max(1, slow)))

    def _wake(self, count: int) -> None:
        """Under ``_mutex``: wake ``count`` waiting workers (of those not woken already)."""
        count = min(count, self._waiting - self._waking)
        if count > 0:
            self._waking += count
            self._not_empty.notify(count)


_EMPTY = object()


class _Refused(Exception):
    """``_Inbox.put`` of a producer's item after ``refuse``."""


class _CallerRun:
    """A caller running the fires it handed over (``caller_runs``)."""

    __slots__ = ("counted", "handlers", "relieved", "since", "thread")

    def __init__(self, thread: threading.Thread, since: float, handlers: set[str]) -> None:
        self.thread = thread
        self.since = since
        self.handlers = handlers
        self.relieved = False  # reported to ``on_relieve``
        self.counted = True  # in ``busy`` (until it ends, or the invoker reports its thread stuck)


class WorkerPool:
    """The ``FireQueue`` port in process: a bounded queue and a fixed set of worker threads."""

    def __init__(
        self,
        run: Callable[[Fire], object],
        *,
        workers: int = 30,
        queue_size: int | None = None,
        stall: float = STALL,
        monotonic: Callable[[], float] = time.monotonic,
        run_many: Callable[..., object] | None = None,
        batchable: Callable[[Fire], bool] = lambda fire: False,
        batch: int = BATCH,
        finish_deferred: Callable[[], object] = lambda: None,
        caller_runs: bool = False,
        caller_batch: int = 0,
        caller_budget: float = 0.0,
        expected: Callable[[Fire], float] = lambda fire: math.inf,
        relieve_after: float = RELIEVE_AFTER,
        take_stalled: Callable[[float, int], Sequence[Callable[[], object]]] | None = None,
    ) -> None:
        """``stall`` and ``monotonic``: when a running worker counts as slow, and its clock (``_Inbox``).
        ``run_many``: a worker that takes a ``batchable`` fire takes the batchable ones queued behind it
        too, up to ``batch`` in all, and runs them together, called ``run_many(fires, defer=...)``: ``defer``
        when more fires are queued behind them, so that their final writes may wait for those
        (``TaskRunner.run_many``); ``finish_deferred`` writes what waits, and a worker calls it whenever it
        finds the queue empty, before it waits for more, and before it runs a fire alone.
        ``caller_runs``, ``relieve_after`` and ``take_stalled``: see the module's docstring; ``on_relieve``
        is set by the caller's owner. ``caller_batch`` (at least ``batch``), ``caller_budget`` and
        ``expected`` (a fire's run, in seconds: its handler's average): a caller's hand-over of more than a
        batch is its own while the fires' expected costs add up to ``caller_budget`` at most, each the
        longer of its ``expected`` run and the caller's pace (``caller_pace``)."""
        self._run = run
        self._run_many = run_many
        self._finish_deferred = finish_deferred
        self._batchable = batchable
        self._batch = batch
        self._caller_batch = max(batch, caller_batch)
        self._caller_budget = caller_budget
        self._expected = expected
        self._queue = _Inbox(queue_size or 2 * workers, stall=stall, monotonic=monotonic)
        self._busy = 0
        self._mutex = threading.Lock()
        self.workers = workers
        self._names = itertools.count()
        self._threads: list[threading.Thread] = []
        self._retired: set[threading.Thread] = set()  # stuck in a handler past its deadline; replaced
        # caller_runs: the fires held for the caller's flush, the callers running theirs, the handlers whose
        # fires go to the workers while a relieved caller's run of them lasts
        self.caller_runs = caller_runs and run_many is not None
        self.on_relieve: Callable[[threading.Thread], object] = lambda thread: None
        self._relieve_after = relieve_after
        self._monotonic = monotonic
        self._held: list[Fire] = []
        self._held_seconds = 0.0  # the held fires' expected costs
        # seconds a fire of the callers' own hand-overs took, whole: a moving average from 0 (``_pace``)
        self.caller_pace = 0.0
        self._spilled = False  # this hand-over put fires in the queue: the rest follow them (until ``flush``)
        self._callers: dict[threading.Thread, _CallerRun] = {}
        self._take_stalled = take_stalled if run_many is not None else None
        self._rests: dict[threading.Thread, _CallerRun] = {}  # threads running the rest of a batch held up
        self._handing = False  # the watch is taking rests (``stop`` waits: they are to be counted)
        self._batching = 0  # workers' batches running (under ``_relief``): the watch stays awake for them
        self._rest_names = itertools.count()
        self._unheld: set[str] = set()
        self._relief = threading.Condition()
        self._relief_idle = True
        self._last_run = -math.inf
        self._closed = False
        with self._mutex:
            for _ in range(workers):
                self._start_worker()
        if self.caller_runs or self._take_stalled is not None:
            threading.Thread(target=self._watch_callers, name="ticklock-pool-relief", daemon=True).start()

    def _start_worker(self) -> None:
        """Under ``_mutex``."""
        thread = threading.Thread(target=self._work, name=f"ticklock-worker-{next(self._names)}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def stuck(self, thread: threading.Thread) -> None:
        """``thread`` is held by a handler past its deadline (its fire is finished elsewhere): it no longer
        counts as busy or as a worker, and another takes its place while the pool runs. (A caller running
        its fires was relieved before this: it only stops counting as busy.)"""
        with self._mutex:
            run = self._callers.get(thread) or self._rests.get(thread)
            if run is not None and run.counted:
                run.counted = False
                self._busy -= 1
            if thread not in self._threads or thread in self._retired:
                return
            self._retired.add(thread)
            self._threads.remove(thread)
            self._busy -= 1
            if not self._queue.refusing:  # no replacement once the pool stops taking fires
                self._start_worker()
        self._queue.left(thread)

    def submit(self, fire: Fire) -> None:
        """Queue ``fire``, waiting while the queue is full; QueueUnavailable (with the fire, and any held for
        the caller) once the pool stops taking fires (``close_intake``), even if this hand-over was waiting
        then: the dispatcher gives such a fire back to the store, where it is due again.

        ``caller_runs``: a quick fire handed over while nothing is queued is held for the caller's ``flush``
        (up to a batch, or past it while it ``_fits``). A fire that has to be queued takes those held before
        it into the queue first: a hand-over of more than that, or of a slow fire, is the workers'."""
        if self.caller_runs:
            if (
                not self._spilled
                and len(self._held) < self._caller_batch
                and not self._queue.refusing
                and not self._queue.qsize()
                and fire.job.handler not in self._unheld
                and self._batchable(fire)
                and self._fits(fire)
            ):
                self._held.append(fire)
                return
            held, self._held, self._held_seconds, self._spilled = self._held, [], 0.0, True
            for i, earlier in enumerate(held):
                try:
                    self._queue.put(earlier)
                except _Refused:
                    raise QueueUnavailable("the worker pool is shutting down", [*held[i:], fire]) from None
        try:
            self._queue.put(fire)
        except _Refused:
            raise QueueUnavailable("the worker pool is shutting down", [fire]) from None

    def _fits(self, fire: Fire) -> bool:
        """Room for a quick ``fire`` in the caller's hand-over (counted if so): within a batch, or past one
        while the held fires' expected costs stay within ``caller_budget``: each the longer of its
        handler's run and the pace of the caller's own hand-overs so far (``_pace``)."""
        seconds = self._held_seconds + max(self._expected(fire), self.caller_pace)
        if len(self._held) >= self._batch and not seconds <= self._caller_budget:
            return False
        self._held_seconds = seconds
        return True

    def close_intake(self) -> None:
        """Take no more fires (the first step of a stop): a hand-over blocked on the full queue ends now,
        raising, instead of completing into a queue drained already, where no worker would run its fire."""
        self._queue.refuse()

    def free_slots(self) -> int:
        # An idle worker takes a fire off the queue at once, so the room left in the queue is the room.
        return max(0, self._queue.maxsize - self._queue.qsize())

    def flush(self) -> None:
        """``caller_runs``: run the fires held for the caller, on the caller's thread, as a worker runs a batch
        (QueueUnavailable with them if the pool stopped taking fires meanwhile)."""
        self._spilled = False
        if not self._held:
            return
        held, self._held, self._held_seconds = self._held, [], 0.0
        if self._queue.refusing:
            raise QueueUnavailable("the worker pool is shutting down", held)
        me = threading.current_thread()
        run = _CallerRun(me, self._monotonic(), {fire.job.handler for fire in held})
        with self._mutex:
            self._busy += 1
            self._callers[me] = run
        self._watched(run.since)
        assert self._run_many is not None  # ``caller_runs`` holds fires only with it
        try:
            self._run_many(held, defer=False)
        except Exception:
            log.exception("worker.crashed", extra={"fires": len(held), "caller": me.name})
        else:  # a run cut short by an error says nothing of the pace
            self._pace(run.since, len(held))
        finally:
            with self._mutex:
                del self._callers[me]
                if run.counted:
                    self._busy -= 1
                if run.relieved:
                    self._unheld -= run.handlers

    def _pace(self, since: float, fires: int) -> None:
        """A caller's hand-over of ``fires`` that began at ``since`` has ended: what it took a fire, into the
        moving average ``_fits`` counts a fire by, an eighth of the way each time, from 0 (so that one
        reading, a cold start's, does not hold the caller to a batch until the next hand-over it keeps). A
        run that lasted past the relief's bound counts as that bound: so long is a hang, or fires dearer than
        any hand-over past a batch can afford (a slow lock's round trips), and either way the next few stay a
        batch or go to the workers. Two callers may write it at once (a relieved one whose run ends while its
        replacement's go on): unlocked, a lost update costs one reading."""
        seconds = min(self._monotonic() - since, self._relieve_after) / fires
        self.caller_pace += (seconds - self.caller_pace) / 8

    def _watched(self, since: float, batches: int = 0) -> None:
        """A batch began at ``since`` (``batches``: a worker's, counted until it ends): the relief's watch
        looks at the runs from now on (``_watch_callers``)."""
        with self._relief:
            self._last_run = since
            self._batching += batches
            if self._relief_idle:
                self._relief.notify()

    def running_caller(self, thread: threading.Thread) -> bool:
        """Whether ``thread`` is running fires it handed over (``caller_runs``)."""
        with self._mutex:
            return thread in self._callers

    def _watch_callers(self) -> None:
        """The relief's watch: every half ``relieve_after`` while batches run (and for RELIEF_IDLE after
        the last began, or while a caller runs its fires), a caller whose run has lasted
        ``relieve_after`` is reported to ``on_relieve``, once, and its handlers' fires go to the workers
        until it ends; and the rest of any batch held up that long goes to a thread of its own
        (``take_stalled``). Polled, not told of each run: being told would cost the wake-up per hand-over
        that a caller's run is there to save. ``on_relieve`` is called under the pool's mutex, with the run
        still registered: the run cannot end (``flush`` cannot return to the caller) until its relief is
        in place, so the caller, on its return, finds itself replaced (no two dispatchers at once)."""
        every = self._relieve_after / 2
        while True:
            with self._relief:
                if self._closed:
                    return
                idle = not (self._callers or self._batching or self._resting())
                if idle and self._monotonic() - self._last_run > RELIEF_IDLE:
                    self._relief_idle = True
                    self._relief.wait()
                    self._relief_idle = False
                    continue
                self._relief.wait(every)
            with self._mutex:
                now = self._monotonic()
                for run in self._callers.values():
                    if run.relieved or now - run.since < self._relieve_after:
                        continue
                    run.relieved = True
                    self._unheld |= run.handlers
                    log.warning(
                        "pool.caller_relieved",
                        extra={
                            "caller": run.thread.name,
                            "seconds": round(now - run.since, 3),
                            "handlers": sorted(run.handlers),
                        },
                    )
                    try:
                        self.on_relieve(run.thread)
                    except Exception:
                        log.exception("pool.on_relieve_failed")
            self._hand_off_stalled()

    def _resting(self) -> int:
        """Under ``_mutex`` or ``_relief`` (a read): the rests running, not reported stuck."""
        return sum(1 for run in self._rests.values() if run.counted)

    def _hand_off_stalled(self) -> None:
        """The watch's second half: each batch's rest that ``take_stalled`` gives, on a thread of its own,
        counted as busy (up to ``workers`` such threads at once, those reported stuck aside; none once the
        pool stops taking fires: a stop that began waits for the rests taken meanwhile, ``_handing``)."""
        if self._take_stalled is None:
            return
        with self._mutex:
            room = self.workers - self._resting()
            if self._queue.refusing or room <= 0:
                return
            self._handing = True
        try:
            for rest in self._take_stalled(self._relieve_after, room):
                self._start_rest(rest)
        except Exception:  # the watch must go on: a caller's relief depends on it
            log.exception("pool.take_stalled_failed")
        finally:
            with self._mutex:
                self._handing = False

    def _start_rest(self, rest: Callable[[], object]) -> None:
        thread = threading.Thread(
            target=self._run_rest, args=(rest,), name=f"ticklock-batch-rest-{next(self._rest_names)}", daemon=True
        )
        with self._mutex:
            self._busy += 1
            self._rests[thread] = _CallerRun(thread, self._monotonic(), set())
        try:
            thread.start()
        except RuntimeError:  # no thread to be had: the watch runs it (its fires are recorded, their locks held)
            log.exception("pool.rest_thread_failed")
            with self._mutex:
                del self._rests[thread]
                self._busy -= 1
            self._run_rest(rest, counted=False)

    def _run_rest(self, rest: Callable[[], object], *, counted: bool = True) -> None:
        me = threading.current_thread()
        try:
            rest()
        except Exception:
            log.exception("worker.crashed", extra={"rest": me.name})
        finally:
            if counted:
                with self._mutex:
                    run = self._rests.pop(me)
                    if run.counted:
                        self._busy -= 1

    def depth(self) -> int:
        return self._queue.qsize()

    def drain_unstarted(self) -> Sequence[Fire]:
        self.close_intake()
        fires, self._held, self._held_seconds = self._held, [], 0.0
        while (item := self._queue.get_nowait()) is not _EMPTY:
            if isinstance(item, Fire):
                fires.append(item)
        return fires

    def stop(self, timeout: float) -> bool:
        """Let the workers finish what they run; True if every one returned within ``timeout``."""
        self.close_intake()
        with self._mutex:
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(_STOP, bounded=False)
        ends_at = time.monotonic() + timeout
        while True:
            with self._mutex:  # a worker stuck meanwhile (``stuck``) is not waited for: its fire was finished
                live = [t for t in self._threads if t.is_alive()]
                # so is a relieved, stuck caller (or a batch's rest); rests being taken are to be waited for
                runs = [*self._callers.values(), *self._rests.values()]
                callers = self._handing or any(run.counted for run in runs)
            left = ends_at - time.monotonic()
            if not live and not callers:
                self._queue.close()
                self._close_relief()
                return True
            if left <= 0:
                self._close_relief()  # a stop that gave up: nothing is relieved any more (dispatching has stopped)
                return False
            if live:
                live[0].join(min(left, 0.1))
            else:
                time.sleep(min(left, 0.01))

    def _close_relief(self) -> None:
        with self._relief:
            self._closed = True
            self._relief.notify()

    def busy(self) -> int:
        with self._mutex:
            return self._busy

    def _finish_deferred_safely(self) -> None:
        try:
            self._finish_deferred()
        except Exception:
            log.exception("worker.finish_deferred_failed")

    def _run_batch(self, fires: list[Fire]) -> None:
        """A worker's batch, watched while it runs (``take_stalled``)."""
        assert self._run_many is not None
        if self._take_stalled is None:
            self._run_many(fires, defer=self._queue.qsize() > 0)
            return
        self._watched(self._monotonic(), batches=1)
        try:
            self._run_many(fires, defer=self._queue.qsize() > 0)
        finally:
            with self._relief:
                self._batching -= 1

    def _work(self) -> None:
        me, done = threading.current_thread(), False
        while me not in self._retired:
            if done and not self._queue.qsize():
                self._finish_deferred_safely()  # nothing waits: what the last batches left is written now
            item = self._queue.get(done=done)
            done = True
            if item is _STOP:
                self._finish_deferred_safely()
                self._queue.left(me)
                return
            assert isinstance(item, Fire)
            with self._mutex:
                self._busy += 1
            try:
                if self._run_many is not None and self._batchable(item):
                    more = self._queue.take_more(self._batchable, self._batch - 1)
                    if more:
                        self._run_batch([item, *more])
                        continue
                self._finish_deferred_safely()
                self._run(item)
            except Exception:
                log.exception(
                    "worker.crashed", extra={"job_id": item.job.id, "fire_time": item.scheduled_at.isoformat()}
                )
            finally:
                with self._mutex:
                    if me not in self._retired:  # a retired worker's busy count went when it was retired
                        self._busy -= 1
        self._finish_deferred_safely()  # retired: what waits is not left to the others' next empty queue
