"""Calling one handler attempt under a deadline, without ever wedging the caller.

* Async handlers run on one shared event loop thread and are cancelled at the deadline.
* Sync handlers run on a thread of their own. Python cannot kill a thread, so at the deadline the
  caller stops waiting, reports TIMEOUT and sets ``ctx.cancelled``; a handler that ignores it keeps
  running until it returns, counted in ``abandoned`` (the ``ticklock_handler_threads_abandoned``
  gauge) - the worker that called it is free at once, so the pool never wedges.
* Inline (``Invoker(inline=True)``, for a caller that passes ``take_over``): a sync handler runs on the
  calling thread itself, and a watchdog thread keeps its deadline: handing each attempt to another thread
  and back costs more CPU than the rest of a quick fire's run (``bench/fire_path.py``). At the deadline
  (and the grace) the watchdog does what the caller would have done with the TIMEOUT: it calls
  ``take_over`` with that result on a thread of its own, and ``on_stuck`` with the caller's thread (a
  pool starts another worker in its place). When the straggler returns at last, ``call`` returns a
  result with ``taken_over`` set: the caller is to do nothing more with it.
* ``interrupt_all`` (shutdown after the grace period) makes every waiting call return INTERRUPTED (an
  inline one: hands INTERRUPTED to its ``take_over``).
"""

from __future__ import annotations

import asyncio
import enum
import heapq
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ticklock.handlers.contract import Handler, HandlerContext

log = logging.getLogger("ticklock.invoke")


class AttemptKind(enum.Enum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class AttemptResult:
    kind: AttemptKind
    error: str | None = None
    abandoned: bool = False  # a sync handler's thread is still running past the deadline
    taken_over: bool = False  # inline: the call outlived its deadline, and ``take_over`` finished the fire


TakeOver = Callable[[AttemptResult], object]


class _NoEvent:
    def set(self) -> None:
        return None


_NO_EVENT: Any = _NoEvent()


class _Call:
    __slots__ = ("abandoned", "ctx", "done", "error", "finished", "grace", "interrupted", "kind", "settled",
                 "take_over", "taken", "thread", "timeout", "told")  # fmt: skip

    def __init__(self, *, inline: bool = False) -> None:
        # an inline call's thread waits for nobody (the watchdog keeps its time): no event to build
        self.done = _NO_EVENT if inline else threading.Event()
        self.kind = AttemptKind.OK
        self.error: str | None = None
        self.interrupted = False
        self.finished = False  # set by the handler's thread, under the invoker's lock
        self.abandoned = False  # set by the caller (inline: the watchdog) at the deadline, under the lock
        # inline calls only
        self.ctx: HandlerContext | None = None
        self.take_over: TakeOver | None = None
        self.thread: threading.Thread | None = None
        self.timeout = 0.0
        self.grace = 0.0
        self.told = False  # the deadline passed: ``ctx.cancelled`` is set, the grace runs
        self.settled: threading.Event | None = None  # set once an abandonment has run its course (``_abandon``)
        self.taken = False  # abandoned, and its take-over started: the fire is the take-over's


class _Runner:
    """A reusable thread for sync handlers: a thread started per attempt costs more than the attempt."""

    def __init__(self, invoker: Invoker) -> None:
        self.invoker = invoker
        self.inbox: queue.SimpleQueue[tuple[Callable[[HandlerContext], Any], HandlerContext, _Call] | None] = (
            queue.SimpleQueue()
        )
        threading.Thread(target=self._loop, name="ticklock-handler", daemon=True).start()

    def _loop(self) -> None:
        while True:
            item = self.inbox.get()
            if item is None:
                return
            func, ctx, call = item
            try:
                func(ctx)
            except BaseException as exc:  # noqa: BLE001 - a handler may raise anything
                call.kind, call.error = AttemptKind.ERROR, describe(exc)
            if not self.invoker._returned(self, call):
                return


class _HandlerTimeout(Exception):
    def __init__(self, original: TimeoutError) -> None:
        super().__init__(str(original))
        self.original = original


def describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Invoker:
    """Runs handler attempts; owns the event loop thread for async handlers."""

    def __init__(self, *, max_idle_threads: int = 64, inline: bool = False) -> None:
        self.inline = inline
        self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=self._loop.run_forever, name="ticklock-async", daemon=True)
        self._loop_thread.start()
        self._lock = threading.Lock()
        self._inflight: set[_Call] = set()
        self._idle: list[_Runner] = []
        self._max_idle = max_idle_threads
        self._closed = False
        self._abandoned = 0
        self.on_abandoned: Callable[[int], None] = lambda count: None
        # inline: the thread a straggler holds (a pool puts another worker in its place)
        self.on_stuck: Callable[[threading.Thread], None] = lambda thread: None
        self._watched: list[tuple[float, int, _Call]] = []  # (monotonic deadline, seq, call): the watchdog's
        self._seq = itertools.count()
        self._wake = threading.Condition(self._lock)
        self._watchdog: threading.Thread | None = None
        self._taking_over: set[threading.Thread] = set()
        self._interrupted = False

    @property
    def abandoned(self) -> int:
        """Sync handler threads still running past their deadline."""
        with self._lock:
            return self._abandoned

    def call(
        self,
        handler: Handler,
        ctx: HandlerContext,
        timeout: float,
        *,
        grace: float = 0.0,
        take_over: TakeOver | None = None,
    ) -> AttemptResult:
        """Run one attempt for at most ``timeout`` seconds. With ``grace``, a sync handler still running
        then is told (``ctx.cancelled``) and given that long to return before it is abandoned. With
        ``take_over`` on an inline invoker, a sync handler runs on this thread (module docstring)."""
        inline = self.inline and take_over is not None and not handler.is_async
        call = _Call(inline=inline)
        if inline:  # all set before ``interrupt_all`` can see the call
            call.ctx, call.take_over, call.thread = ctx, take_over, threading.current_thread()
            call.timeout, call.grace = timeout, grace
        with self._lock:
            self._inflight.add(call)
        try:
            if inline:
                return self._call_inline(handler, ctx, call)
            if handler.is_async:
                return self._call_async(handler, ctx, timeout, call)
            return self._call_sync(handler, ctx, timeout, call, grace)
        finally:
            with self._lock:
                self._inflight.discard(call)

    def interrupt_all(self) -> None:
        """Make every call in flight return INTERRUPTED now (their handlers see ``cancelled``)."""
        with self._lock:
            self._interrupted = True  # an inline call starting after this is cut off before its handler runs
            calls = list(self._inflight)
        for call in calls:
            call.interrupted = True
            if call.take_over is not None:
                self._abandon(call, AttemptResult(AttemptKind.INTERRUPTED, "cut off by shutdown", abandoned=True))
            call.done.set()

    def close(self, timeout: float = 10.0) -> None:
        """Stop the threads; first wait (up to ``timeout``) for the take-overs still finishing fires."""
        ends_at = time.monotonic() + timeout
        while time.monotonic() < ends_at:
            with self._lock:
                taking_over = next(iter(self._taking_over), None)
            if taking_over is None:
                break
            taking_over.join(max(0.0, min(0.1, ends_at - time.monotonic())))
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._wake.notify_all()
        for runner in idle:
            runner.inbox.put(None)
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._loop_thread.join(timeout=5)
        if not self._loop_thread.is_alive():
            self._loop.close()

    # -- sync -----------------------------------------------------------------------------------------
    def _call_sync(
        self, handler: Handler, ctx: HandlerContext, timeout: float, call: _Call, grace: float
    ) -> AttemptResult:
        with self._lock:
            runner = self._idle.pop() if self._idle else None
        (runner or _Runner(self)).inbox.put((handler.func, ctx, call))
        told = not call.done.wait(timeout) and grace > 0 and not call.interrupted
        if told:
            ctx.cancelled.set()  # told to stop, and given ``grace`` to do so
            call.done.wait(grace)
        with self._lock:
            if call.finished and told:  # it stopped when told: past its time, but nothing is left running
                return AttemptResult(AttemptKind.TIMEOUT, f"handler did not return within {timeout:.3g}s")
            if call.finished:
                return AttemptResult(call.kind, call.error)
            call.abandoned = True
            self._abandoned += 1
            count = self._abandoned
        ctx.cancelled.set()
        self.on_abandoned(count)
        if call.interrupted:
            return AttemptResult(AttemptKind.INTERRUPTED, "cut off by shutdown", abandoned=True)
        return AttemptResult(AttemptKind.TIMEOUT, f"handler did not return within {timeout:.3g}s", abandoned=True)

    def _returned(self, runner: _Runner, call: _Call) -> bool:
        """A handler returned on ``runner``: wake its caller, and keep the thread for the next call."""
        with self._lock:
            call.finished = True
            was_abandoned = call.abandoned
            if was_abandoned:
                self._abandoned -= 1
            count = self._abandoned
            keep = not self._closed and len(self._idle) < self._max_idle
            if keep:
                self._idle.append(runner)
        call.done.set()
        if was_abandoned:
            self.on_abandoned(count)
        return keep

    # -- inline ---------------------------------------------------------------------------------------
    def _call_inline(self, handler: Handler, ctx: HandlerContext, call: _Call) -> AttemptResult:
        with self._lock:
            given_up = call.abandoned  # by ``interrupt_all``, as the call entered: its take-over finishes the fire
            if self._interrupted and not given_up:  # the service is being cut off: no handler starts now
                call.finished = True  # and ``interrupt_all``, if it comes now, takes nothing over
                return AttemptResult(AttemptKind.INTERRUPTED, "cut off by shutdown")
            if not given_up:
                self._watch_call(call)
        if given_up:
            return self._given_up(call)
        try:
            handler.func(ctx)
        except BaseException as exc:  # noqa: BLE001 - a handler may raise anything
            call.kind, call.error = AttemptKind.ERROR, describe(exc)
        with self._lock:
            call.finished = True
            abandoned, told = call.abandoned, call.told
            if not abandoned:
                call.ctx = call.take_over = None  # its entry may stay in the watchdog's heap a while
        if abandoned:
            result = self._given_up(call)
            if result.taken_over:  # its take-over finished the fire: what the handler did now is for nobody
                return result
            told = True  # no take-over could start: this (late) return is the attempt's end after all
        if told:  # it stopped when told: past its time, but nothing is left running
            return AttemptResult(AttemptKind.TIMEOUT, f"handler did not return within {call.timeout:.3g}s")
        return AttemptResult(call.kind, call.error)

    def _watch_call(self, call: _Call) -> None:
        """Under ``_lock``: the watchdog keeps the inline ``call``'s deadline."""
        if self._watchdog is None:
            self._watchdog = threading.Thread(target=self._watch, name="ticklock-watchdog", daemon=True)
            self._watchdog.start()
        at = time.monotonic() + call.timeout
        if not self._watched or at < self._watched[0][0]:
            self._wake.notify()
        if len(self._watched) > 4 * len(self._inflight) + 64:
            # most calls end long before their deadline: drop theirs, so that the heap stays as small as
            # the calls in flight (each rebuild is paid for by the pushes since the last)
            self._watched = [item for item in self._watched if not (item[2].finished or item[2].abandoned)]
            heapq.heapify(self._watched)
        heapq.heappush(self._watched, (at, next(self._seq), call))

    def _given_up(self, call: _Call) -> AttemptResult:
        """An abandoned inline call's end, once its abandonment has run its course (``_abandon``): taken over
        (its take-over finishes the fire), or not (no take-over could start: the caller finishes it)."""
        assert call.settled is not None
        call.settled.wait()  # until its take-over has started and its thread is reported
        with self._lock:
            self._abandoned -= 1
            count = self._abandoned
        self._report_abandoned(count)
        if call.taken:
            kind = AttemptKind.INTERRUPTED if call.interrupted else AttemptKind.TIMEOUT
            return AttemptResult(kind, "returned after its take-over", abandoned=True, taken_over=True)
        return AttemptResult(AttemptKind.INTERRUPTED, "cut off by shutdown", abandoned=True)

    def _report_abandoned(self, count: int) -> None:
        try:
            self.on_abandoned(count)
        except Exception:
            log.exception("invoker.on_abandoned_failed")

    def _watch(self) -> None:
        """The watchdog: tells each inline call at its deadline, and abandons it when the grace is over."""
        with self._lock:
            while not self._closed:
                if not self._watched:
                    self._wake.wait()
                    continue
                at, _, call = self._watched[0]
                left = at - time.monotonic()
                if left > 0:
                    self._wake.wait(left)
                    continue
                heapq.heappop(self._watched)
                if call.finished or call.abandoned:
                    continue
                if call.grace > 0 and not call.told and call.ctx is not None:
                    call.told = True
                    call.ctx.cancelled.set()  # told to stop, and given ``grace`` to do so
                    heapq.heappush(self._watched, (at + call.grace, next(self._seq), call))
                    continue
                result = AttemptResult(
                    AttemptKind.TIMEOUT, f"handler did not return within {call.timeout:.3g}s", abandoned=True
                )
                self._lock.release()  # the callbacks run without the lock
                try:
                    self._abandon(call, result)
                except Exception:  # the watchdog must outlive any one abandonment
                    log.exception("invoker.abandon_failed")
                finally:
                    self._lock.acquire()

    def _abandon(self, call: _Call, result: AttemptResult) -> None:
        """Give the inline ``call`` up (unless its handler returned meanwhile): its fire is finished with
        ``result`` by its ``take_over`` on a new thread, and its own thread is reported stuck. Until that is
        done (``settled``) the handler's return waits, so that its thread takes no other work first."""
        with self._lock:
            if call.finished or call.abandoned:
                return
            call.abandoned = True
            call.settled = settled = threading.Event()
            self._abandoned += 1
            count = self._abandoned
            ctx, take_over, stuck = call.ctx, call.take_over, call.thread
        try:
            assert ctx is not None and take_over is not None and stuck is not None
            ctx.cancelled.set()
            self._report_abandoned(count)
            thread = threading.Thread(target=self._take_over, args=(take_over, result), name="ticklock-take-over")
            thread.daemon = True
            with self._lock:  # in the set before it runs: ``close`` waits for it (it leaves under the lock)
                self._taking_over.add(thread)
                try:
                    thread.start()
                except BaseException:
                    self._taking_over.discard(thread)
                    raise
                call.taken = True
            try:
                self.on_stuck(stuck)
            except Exception:  # the pool keeps a worker fewer: the fire is finished all the same
                log.exception("invoker.on_stuck_failed")
        finally:
            settled.set()

    def _take_over(self, take_over: TakeOver, result: AttemptResult) -> None:
        try:
            take_over(result)
        except Exception:
            log.exception("take_over.failed")
        finally:
            with self._lock:
                self._taking_over.discard(threading.current_thread())

    # -- async ----------------------------------------------------------------------------------------
    def _call_async(self, handler: Handler, ctx: HandlerContext, timeout: float, call: _Call) -> AttemptResult:
        async def own() -> Any:
            try:
                return await handler.func(ctx)
            except TimeoutError as exc:
                # keep the handler's own TimeoutError apart from wait_for's deadline
                raise _HandlerTimeout(exc) from exc

        async def guarded() -> Any:
            return await asyncio.wait_for(own(), timeout)

        future: Future[Any] = asyncio.run_coroutine_threadsafe(guarded(), self._loop)
        future.add_done_callback(lambda _f: call.done.set())
        # wait_for cancels at the deadline; the extra second covers a handler slow to unwind.
        call.done.wait(timeout + 1.0)
        if call.interrupted and not future.done():
            ctx.cancelled.set()
            future.cancel()
            return AttemptResult(AttemptKind.INTERRUPTED, "cut off by shutdown")
        if not future.done():
            ctx.cancelled.set()
            future.cancel()
            return AttemptResult(AttemptKind.TIMEOUT, f"handler did not return within {timeout:.3g}s")
        try:
            future.result()
        except _HandlerTimeout as exc:
            return AttemptResult(AttemptKind.ERROR, describe(exc.original))
        except TimeoutError:
            ctx.cancelled.set()
            return AttemptResult(AttemptKind.TIMEOUT, f"handler did not return within {timeout:.3g}s")
        except BaseException as exc:  # noqa: BLE001 - a handler may raise anything
            return AttemptResult(AttemptKind.ERROR, describe(exc))
        return AttemptResult(AttemptKind.OK)
